{{ header }}
//! The {{ m.kind }} API: `{{ m.group }}/{{ m.version }}`, generated from the manifest.
use std::collections::BTreeMap;

use kfop_runtime::api::{ReplicaSpec, RunPolicy};

#[kfop_runtime::training_job(
    group = "{{ m.group }}",
    version = "{{ m.version }}",
    kind = "{{ m.kind }}",
    plural = "{{ m.plural }}",
{%- for s in m.short_names %}
    shortname = "{{ s }}",
{%- endfor %}
    controller = "{{ m.controller_name }}",
    framework = "{{ m.framework_name }}",
    container = "{{ m.container }}",
{%- if m.container_required %}
    container_required,
{%- endif %}
{%- if let Some((port_name, port)) = m.port %}
    port_name = "{{ port_name }}",
    port = {{ port }},
{%- endif %}
{%- if let Some(scale) = m.scale %}
    scale = "{{ scale }}",
{%- endif %}
{%- for r in m.roles %}
    role(name = "{{ r.name }}"{% if r.master %}, master{% endif %}{% if r.required %}, required{% endif %}, restart_policy = "{{ r.restart_policy }}"{% if let Some(min) = r.min_replicas %}, min_replicas = {{ min }}{% endif %}{% if let Some(max) = r.max_replicas %}, max_replicas = {{ max }}{% endif %}, default_replicas = {{ r.default_replicas }}),
{%- endfor %}
)]
pub struct {{ m.kind }}Spec {
    #[serde(default)]
    pub run_policy: RunPolicy,
    #[kfop(replica_specs)]
    pub {{ m.replica_specs_rust }}: BTreeMap<String, ReplicaSpec>,
    /// Framework-specific fields, declared in `src/spec.rs`.
    #[serde(flatten)]
    pub extra: crate::spec::{{ m.kind }}Extra,
}
