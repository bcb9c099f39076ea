use schemars::{Schema, SchemaGenerator, json_schema};

/// Schema for embedded pod templates: an object whose fields the API server keeps as given.
///
/// The full PodTemplateSpec schema is over 200 KiB per replica type and pushes a CRD past the
/// 256 KiB `kubectl apply` annotation limit; the API server validates the pod on creation anyway.
pub fn preserve_unknown_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true })
}

/// Schema for a list of objects kept as given (e.g. autoscaling/v2 MetricSpecs).
pub fn preserve_unknown_array(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": { "type": "object", "x-kubernetes-preserve-unknown-fields": true }
    })
}
