{{ header }}
//! The {{ m.kind }} framework: `kfop.yaml`, embedded and loaded the way the operator loads a
//! `Framework` applied at run time.
{%- if m.hooks %}
//! Its code is `impl Framework for {{ m.framework_type() }}` in `src/hooks.rs`.
{%- else %}
//! It has no code; with `hooks: true` in `kfop.yaml`, `kfop gen` creates `src/hooks.rs` for it.
{%- endif %}
use std::path::Path;

use kfop_runtime::{LoadError, Loaded};
{%- if m.hooks %}

use super::hooks::{{ m.framework_type() }};
{%- endif %}

/// `kfop.yaml` as `kfop gen` validated it.
pub const KFOP_YAML: &str = include_str!("../../kfop.yaml");

// A `kfop.yaml` changed since `kfop gen` validated it fails the build here, not the operator's
// start.
const _: () = assert!(
    kfop_runtime::manifest::fingerprint(KFOP_YAML) == {{ fingerprint }},
    "kfop.yaml changed since `kfop gen` read it: run `kfop gen`"
);
{%- if !m.hooks %}

/// The {{ m.kind }} framework's code: none, the manifest says everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct {{ m.framework_type() }};

impl kfop_runtime::Framework for {{ m.framework_type() }} {
    type Job = super::api::{{ m.kind }};
}
{%- endif %}

/// The {{ m.kind }} framework, ready to register: the manifest with `code`.
pub fn framework(code: {{ m.framework_type() }}) -> Result<Loaded<{{ m.framework_type() }}>, LoadError> {
    Loaded::load(KFOP_YAML, Path::new("kfop.yaml"), code)
}

#[cfg(test)]
mod tests {
    /// What the build cannot check: the manifest loads (as `kfop gen` found it did).
    #[test]
    fn the_manifest_loads() {
        let loaded = kfop_runtime::Manifest::load(super::KFOP_YAML, std::path::Path::new("kfop.yaml"));
        assert_eq!(loaded.err().map(|e| e.to_string()), None);
    }
}
