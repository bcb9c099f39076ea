//! The manifest as `kfop gen` renders it: the model (parsed and validated by
//! [`kfop_runtime::manifest::model`], shared with the operator that loads manifests at run time)
//! and the Rust and file names the templates write from it.
use std::path::Path;

use heck::ToUpperCamelCase;
pub use kfop_runtime::manifest::model::*;
use serde::Deserialize;
use serde_saphyr::Spanned;

/// `spec.hooks` alone, with its position: the one field [`check_manifest_only`] reads again
/// (unknown fields are [`parse`]'s business, so they are ignored here).
#[derive(Debug, Deserialize)]
struct HooksOnly {
    spec: HooksSpec,
}

#[derive(Debug, Deserialize)]
struct HooksSpec {
    hooks: Option<Spanned<bool>>,
}

/// Checks that the manifest (already [`parse`]d) runs without a crate, as a run-time framework
/// the all-in-one operator loads: nothing compiles its Rust hooks, so `hooks: true` is refused
/// here, at its line, rather than by the operator after the apply.
pub fn check_manifest_only(text: &str, file: &Path) -> Result<(), ManifestError> {
    let raw: HooksOnly = serde_saphyr::from_str(text).map_err(|e| syntax_error(&e, file))?;
    match raw.spec.hooks {
        Some(hooks) if hooks.value => Err(ManifestError {
            file: file.to_owned(),
            line: hooks.referenced.line() as usize,
            column: hooks.referenced.column() as usize,
            field: "spec.hooks".to_owned(),
            message: "a manifest-only framework has no crate to hold Rust hooks; remove `hooks: true` \
                      (and a `status.rule: hook`), or scaffold an operator crate with `kfop new` without --no-code"
                .to_owned(),
        }),
        _ => Ok(()),
    }
}

/// Names and Rust expressions the templates write for a manifest.
pub trait ModelCode {
    /// The crate name, e.g. `foo-operator`.
    fn crate_name(&self) -> String;
    /// The crate's Rust identifier, e.g. `foo_operator`.
    fn crate_ident(&self) -> String;
    /// The framework type's Rust name, e.g. `Foo`.
    fn framework_type(&self) -> String;
    /// Whether one role is the master.
    fn has_master(&self) -> bool;
}

impl ModelCode for Model {
    fn crate_name(&self) -> String {
        format!("{}-operator", self.name)
    }

    fn crate_ident(&self) -> String {
        self.crate_name().replace('-', "_")
    }

    fn framework_type(&self) -> String {
        self.name.to_upper_camel_case()
    }

    fn has_master(&self) -> bool {
        self.roles.iter().any(|r| r.master)
    }
}
