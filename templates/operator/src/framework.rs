{{ header }}
//! The {{ m.framework_type() }} framework: environment from the manifest, then the hooks in
//! `src/hooks.rs`.
use std::collections::BTreeMap;
use std::sync::LazyLock;

use kfop_runtime::api::ReplicaSpec;
use kfop_runtime::env::{EnvSpec, {% if !m.env.is_empty() %}EnvValue, Template, {% endif %}TemplateError};
use kfop_runtime::k8s_openapi::api::core::v1::PodTemplateSpec;
use kfop_runtime::plan::StatusUpdate;
use kfop_runtime::policy::SuccessPolicy;
use kfop_runtime::{Framework, FrameworkError, PodContext};

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

impl Framework for {{ m.framework_type() }} {
    type Job = {{ m.kind }};

    fn is_master(&self, specs: &BTreeMap<String, ReplicaSpec>, role: &str, index: i32) -> bool {
        let declared = self.info().role(role).is_some_and(|r| r.master);
        crate::hooks::is_master(specs, role, index, declared)
    }

    fn decorate_pod(&self, ctx: &PodContext<'_, {{ m.kind }}>, template: &mut PodTemplateSpec) -> Result<(), FrameworkError> {
        let env = ENV.as_ref().map_err(|e| FrameworkError(e.to_string()))?;
        ctx.with_env(self.info(), |e| kfop_runtime::env::inject(env, e, template))
            .map_err(|e| FrameworkError(e.to_string()))?;
        crate::hooks::decorate_pod(ctx, template)
    }

    fn success_policy(&self, job: &{{ m.kind }}, specs: &BTreeMap<String, ReplicaSpec>) -> SuccessPolicy {
        let _ = job;
{%- for (kind, role) in m.success %}
        if specs.contains_key("{{ role }}") {
            return SuccessPolicy::{{ kind.variant() }}("{{ role }}".to_owned());
        }
{%- endfor %}
        SuccessPolicy::master_else_all(self.info(), specs)
    }

    fn update_status(&self, job: &{{ m.kind }}, update: &mut StatusUpdate<'_, '_>) {
        let policy = self.success_policy(job, update.specs());
        crate::hooks::update_status(job, update, &policy);
    }
}
