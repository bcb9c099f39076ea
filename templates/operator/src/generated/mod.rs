{{ header }}
//! What kfop generates from `kfop.yaml`: the {{ m.kind }} API types and the embedded manifest.
//! Your `src/spec.rs`{% if m.hooks %} and `src/hooks.rs` are{% else %} is{% endif %} compiled from here, so a manifest change never needs
//! an edit to `src/lib.rs`.
pub mod api;
pub mod framework;
#[path = "../spec.rs"]
pub mod spec;
{%- if m.hooks %}
#[path = "../hooks.rs"]
pub mod hooks;
{%- endif %}

pub use api::{{ "{" }}{{ m.kind }}, {{ m.kind }}Spec};
{%- if m.hooks %}
pub use framework::{KFOP_YAML, framework};
pub use hooks::{{ m.framework_type() }};
{%- else %}
pub use framework::{{ "{" }}{{ m.framework_type() }}, KFOP_YAML, framework};
{%- endif %}
