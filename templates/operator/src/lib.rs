{{ header }}
//! The {{ m.kind }} operator as a library: API types, the framework and its hooks.
pub mod api;
pub mod framework;
pub mod hooks;
{%- if m.owns_objects() %}
pub mod objects;
{%- endif %}
pub mod spec;

pub use api::{{ "{" }}{{ m.kind }}, {{ m.kind }}Spec};
pub use framework::{{ m.framework_type() }};
