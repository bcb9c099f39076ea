//! The manifest as `kfop gen` renders it: the model (parsed and validated by
//! [`kfop_runtime::manifest::model`], shared with the operator that loads manifests at run time)
//! and the Rust and file names the templates write from it.
use std::path::Path;

use heck::ToUpperCamelCase;
use kfop_runtime::RuleWording;
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
    /// The k8s-openapi types of the objects the jobs own besides pods, services and PodGroups.
    fn owned_types(&self) -> Vec<(&'static str, &'static str)>;
    /// The `StatusRule` expression the generated framework carries.
    fn status_rule(&self) -> String;
    /// What the generated code imports for [`Self::status_rule`] outside the runtime's root,
    /// as `use` paths.
    fn status_imports(&self) -> Vec<&'static str>;
    /// What the generated code imports from the runtime's root, e.g. `Manifest, StatusRule`.
    fn runtime_imports(&self) -> String;
    /// The framework type's Rust name, e.g. `Foo`.
    fn framework_type(&self) -> String;
    /// Whether one role is the master.
    fn has_master(&self) -> bool;
}

/// An env entry as the templates write it.
pub trait EnvCode {
    /// The template or field path as a Rust string literal.
    fn value_literal(&self) -> String;
}

impl EnvCode for EnvModel {
    fn value_literal(&self) -> String {
        format!(
            "{:?}",
            self.value
                .as_deref()
                .or(self.field_ref.as_deref())
                .unwrap_or_default()
        )
    }
}

impl ModelCode for Model {
    fn crate_name(&self) -> String {
        format!("{}-operator", self.name)
    }

    fn crate_ident(&self) -> String {
        self.crate_name().replace('-', "_")
    }

    fn owned_types(&self) -> Vec<(&'static str, &'static str)> {
        self.resources.iter().filter_map(|r| r.owned_type()).collect()
    }

    fn status_rule(&self) -> String {
        let string = |s: &str| format!("{s:?}.to_owned()");
        let wording = |w: &RuleWording| {
            format!(
                "RuleWording {{ subject: {}, exit_code_restart_events: {} }}",
                w.subject
                    .as_deref()
                    .map_or("None".to_owned(), |s| format!("Some({})", string(s))),
                w.exit_code_restart_events,
            )
        };
        // Compiled when a job first needs it; `kfop gen` checked the text.
        let cel =
            |e: Option<&str>| e.map_or("None".to_owned(), |e| format!("Some(CelRule::deferred({e:?}))"));
        match &self.status {
            StatusModel::SuccessRules(w) => format!(
                "StatusRule::SuccessRules {{ rules: vec![{}], wording: {} }}",
                self.success
                    .iter()
                    .map(|(kind, role)| format!("SuccessPolicy::{}({})", kind.variant(), string(role)))
                    .collect::<Vec<_>>()
                    .join(", "),
                wording(w),
            ),
            StatusModel::LeaderOrFollowers { leader, followers } => format!(
                "StatusRule::LeaderOrFollowers {{ leader: {}, followers: {} }}",
                leader
                    .as_deref()
                    .map_or("None".to_owned(), |s| format!("Some({})", string(s))),
                string(followers),
            ),
            StatusModel::Hook => "StatusRule::Hook".to_owned(),
            StatusModel::Cel {
                succeeded,
                running,
                failed,
                wording: w,
            } => format!(
                "StatusRule::Cel(CelStatus {{ succeeded: CelRule::deferred({succeeded:?}), running: {}, failed: {}, wording: {} }})",
                cel(running.as_deref()),
                cel(failed.as_deref()),
                wording(w),
            ),
        }
    }

    fn status_imports(&self) -> Vec<&'static str> {
        match &self.status {
            StatusModel::SuccessRules(_) if !self.success.is_empty() => {
                vec!["kfop_runtime::policy::SuccessPolicy"]
            }
            StatusModel::Cel { .. } => vec!["kfop_runtime::cel_rule::CelRule"],
            StatusModel::SuccessRules(_) | StatusModel::LeaderOrFollowers { .. } | StatusModel::Hook => {
                Vec::new()
            }
        }
    }

    fn runtime_imports(&self) -> String {
        let wording: &[&str] = match &self.status {
            StatusModel::SuccessRules(_) => &["RuleWording"],
            StatusModel::Cel { .. } => &["CelStatus", "RuleWording"],
            StatusModel::LeaderOrFollowers { .. } | StatusModel::Hook => &[],
        };
        let mut names = [
            &["FrameworkManifest", "Manifest", "MasterRule", "StatusRule"],
            wording,
        ]
        .concat();
        names.sort_unstable();
        names.join(", ")
    }

    fn framework_type(&self) -> String {
        self.name.to_upper_camel_case()
    }

    fn has_master(&self) -> bool {
        self.roles.iter().any(|r| r.master)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::path::Path;

    use super::*;

    #[test]
    fn a_cel_status_is_written_as_its_constructor() {
        let text = default_manifest("foo", "foo.example.com").replace(
            "  success:\n    - allOf: Master\n    - allOf: Worker\n",
            "  status:\n    rule: cel\n    succeeded: 'replicas.Master.succeeded == 1 && \"a\" != \"b\"'\n",
        );
        let model = parse(&text, Path::new("kfop.yaml")).unwrap();
        assert_eq!(
            model.status_rule(),
            r#"StatusRule::Cel(CelStatus { succeeded: CelRule::deferred("replicas.Master.succeeded == 1 && \"a\" != \"b\""), running: None, failed: None, wording: RuleWording { subject: None, exit_code_restart_events: false } })"#
        );
        assert_eq!(model.status_imports(), ["kfop_runtime::cel_rule::CelRule"]);
        assert_eq!(
            model.runtime_imports(),
            "CelStatus, FrameworkManifest, Manifest, MasterRule, RuleWording, StatusRule"
        );
    }
}
