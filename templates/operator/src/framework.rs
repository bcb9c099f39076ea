{{ header }}
//! The {{ m.framework_type() }} framework: environment from the manifest, then the hooks in
//! `src/hooks.rs`.
use std::sync::LazyLock;

use kfop_runtime::env::{EnvSpec, {% if !m.env.is_empty() %}EnvValue, Template, {% endif %}TemplateError};

use crate::api::{{ m.kind }};

/// The {{ m.kind }} framework.
#[derive(Debug, Clone, Copy, Default)]
pub struct {{ m.framework_type() }};

{%- if !m.env.is_empty() %}
const ROLES: [&str; {{ m.roles.len() }}] = [{% for r in m.roles %}"{{ r.name }}"{% if !loop.last %}, {% endif %}{% endfor %}];
{%- endif %}

/// The manifest's `env`, parsed once; the generator already validated every template.
static ENV: LazyLock<Result<Vec<EnvSpec>, TemplateError>> = LazyLock::new(|| {
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
});

kfop_runtime::manifest_framework!(
    {{ m.framework_type() }},
    {{ m.kind }},
    env = ENV,
    success = [{% for (kind, role) in m.success %}({{ kind.variant() }}, "{{ role }}"), {% endfor %}],
    hooks = crate::hooks,
{%- if m.owns_objects() %}
    objects = crate::objects,
{%- endif %}
);
