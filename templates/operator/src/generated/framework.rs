{{ header }}
//! The {{ m.framework_type() }} framework as data: the manifest's environment, status rule,
//! master pods and owned kinds.
{%- if m.hooks %}
//! Its code is `impl Hooks for {{ m.framework_type() }}` in `src/hooks.rs`.
{%- else %}
//! It has no code; with `hooks: true` in `kfop.yaml`, `kfop gen` creates `src/hooks.rs` for it.
{%- endif %}
use std::sync::LazyLock;

use kfop_runtime::env::{EnvSpec, {% if !m.env.is_empty() %}EnvValue, Template, {% endif %}TemplateError};
{%- for (module, name) in m.owned_types() %}
use kfop_runtime::k8s_openapi::api::{{ module }}::{{ name }};
{%- endfor %}
{%- if !m.owned_types().is_empty() %}
use kfop_runtime::kube::api::ApiResource;
{%- endif %}
{%- for path in m.status_imports() %}
use {{ path }};
{%- endfor %}
use kfop_runtime::{ {{- m.runtime_imports() -}} };

use super::api::{{ m.kind }};

/// The {{ m.kind }} framework.
#[derive(Debug, Clone, Copy, Default)]
pub struct {{ m.framework_type() }};

{%- if !m.env.is_empty() %}
const ROLES: [&str; {{ m.roles.len() }}] = [{% for r in m.roles %}"{{ r.name }}"{% if !loop.last %}, {% endif %}{% endfor %}];
{%- endif %}

/// The manifest's `env`; the generator already validated every template.
fn env() -> Result<Vec<EnvSpec>, TemplateError> {
{%- if !m.env.is_empty() %}
    let strings = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
{%- endif %}
    Ok(vec![
{%- for e in m.env %}
        EnvSpec {
            name: "{{ e.name }}".to_owned(),
{%- if e.value.is_some() %}
            value: EnvValue::Template(Template::parse({{ e.value_literal() }}, &ROLES)?),
{%- else %}
            value: EnvValue::FieldRef({{ e.value_literal() }}.to_owned()),
{%- endif %}
            roles: strings(&[{% for r in e.roles %}"{{ r }}", {% endfor %}]),
            requires: strings(&[{% for r in e.requires %}"{{ r }}", {% endfor %}]),
            unless: strings(&[{% for r in e.unless %}"{{ r }}", {% endfor %}]),
            index: {% if let Some(i) = e.index %}Some({{ i }}){% else %}None{% endif %},
            all_containers: {{ e.all_containers }},
        },
{%- endfor %}
    ])
}

/// The manifest, built once.
static MANIFEST: LazyLock<FrameworkManifest> = LazyLock::new(|| FrameworkManifest {
    env: env(),
    status: {{ m.status_rule() }},
    master: MasterRule::{% if m.master_index_zero %}IndexZero{% else %}Roles{% endif %},
    owned: vec![{% for (_, name) in m.owned_types() %}ApiResource::erase::<{{ name }}>(&()), {% endfor %}],
});

impl Manifest for {{ m.framework_type() }} {
    type Job = {{ m.kind }};

    fn manifest(&self) -> &FrameworkManifest {
        &MANIFEST
    }
}
{%- if !m.hooks %}

/// No hooks: the manifest says everything.
impl kfop_runtime::Hooks for {{ m.framework_type() }} {}
{%- endif %}
