//! The CRD of a run-time job kind, built from its manifest with the schema settings kube-derive
//! uses for compiled kinds: the shared types' schemas (replica spec, run policy, status, with
//! their own admission rules), the manifest's roles as rules on the replica-specs map, printer
//! columns, and the status and scale subresources.
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionNames, CustomResourceDefinitionSpec,
    CustomResourceDefinitionVersion, CustomResourceSubresourceScale, CustomResourceSubresourceStatus,
    CustomResourceSubresources, CustomResourceValidation, JSONSchemaProps,
};
use kube::core::schema::{OptionalEnum, OptionalIntOrString, StructuralSchemaRewriter};
use schemars::JsonSchema;
use serde_json::{Value, json};

use crate::api::{JobStatus, ReplicaSpec, RunPolicy};
use crate::manifest::model::Model;

/// The label every kfop-installed run-time CRD carries, naming the Framework it came from.
pub const FRAMEWORK_LABEL: &str = "kfop.dev/framework";

/// A type's schema as kube-derive writes it into a CRD.
fn schema_of<T: JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .with_transform(schemars::transform::AddNullable::default())
        .with_transform(StructuralSchemaRewriter)
        .with_transform(OptionalEnum)
        .with_transform(OptionalIntOrString)
        .into_generator();
    let mut value = generator.into_root_schema_for::<T>().to_value();
    if let Some(object) = value.as_object_mut() {
        object.remove("title");
    }
    value
}

/// The admission rules the manifest's roles put on the replica-specs map.
fn role_rules(model: &Model) -> Vec<Value> {
    let field = &model.replica_specs_field;
    let names: Vec<&str> = model.roles.iter().map(|r| r.name.as_str()).collect();
    let lower: Vec<String> = names.iter().map(|n| format!("'{}'", n.to_lowercase())).collect();
    let lower = lower.join(", ");
    vec![
        json!({
            "rule": "self.size() > 0",
            "message": format!("spec.{field} must not be empty: add at least one of {}", names.join(", ")),
        }),
        json!({
            "rule": format!("self.all(k, k.lowerAscii() in [{lower}])"),
            "message": format!("spec.{field} has an unknown replica type: use only {} (any letter case)", names.join(", ")),
        }),
        json!({
            "rule": format!("[{lower}].all(r, self.filter(k, k.lowerAscii() == r).size() <= 1)"),
            "message": format!("spec.{field} names a replica type twice in different letter case: keep one key per replica type"),
        }),
    ]
}

/// The CRD `model` describes; `framework` labels it with the Framework that installed it.
pub fn crd(model: &Model) -> Result<CustomResourceDefinition, serde_json::Error> {
    let field = &model.replica_specs_field;
    let mut run_policy = schema_of::<RunPolicy>();
    run_policy["default"] = json!({});
    let schema = json!({
        "type": "object",
        "description": format!("A {} ({}/{}): a {} training job, registered at run time.", model.kind, model.group, model.version, model.framework_name),
        "required": ["spec"],
        "properties": {
            "spec": {
                "type": "object",
                "required": [field],
                "properties": {
                    field: {
                        "type": "object",
                        "additionalProperties": schema_of::<ReplicaSpec>(),
                        "maxProperties": model.roles.len(),
                        "x-kubernetes-validations": role_rules(model),
                    },
                    "runPolicy": run_policy,
                },
            },
            "status": schema_of::<JobStatus>(),
        },
        "x-kubernetes-validations": [{
            "rule": "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
            "message": "metadata.name must be a DNS-1035 label (lower-case letters, digits and '-', starting with a letter and ending with a letter or digit): it starts the names of the job's pods and Services; rename the job",
        }],
    });
    let schema: JSONSchemaProps = serde_json::from_value(schema)?;
    let scale = model.scale.as_ref().map(|role| CustomResourceSubresourceScale {
        spec_replicas_path: format!(".spec.{field}.{role}.replicas"),
        status_replicas_path: format!(".status.replicaStatuses.{role}.active"),
        label_selector_path: Some(format!(".status.replicaStatuses.{role}.selector")),
    });
    let columns = serde_json::from_value(json!([
        {"name": "State", "type": "string", "jsonPath": ".status.conditions[-1:].type"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]))?;
    let mut crd = CustomResourceDefinition {
        spec: CustomResourceDefinitionSpec {
            group: model.group.clone(),
            names: CustomResourceDefinitionNames {
                kind: model.kind.clone(),
                plural: model.plural.clone(),
                singular: Some(model.kind.to_lowercase()),
                short_names: (!model.short_names.is_empty()).then(|| model.short_names.clone()),
                ..CustomResourceDefinitionNames::default()
            },
            scope: "Namespaced".to_owned(),
            versions: vec![CustomResourceDefinitionVersion {
                name: model.version.clone(),
                served: true,
                storage: true,
                additional_printer_columns: Some(columns),
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(schema),
                }),
                subresources: Some(CustomResourceSubresources {
                    status: Some(CustomResourceSubresourceStatus(Value::Object(Default::default()))),
                    scale,
                }),
                ..CustomResourceDefinitionVersion::default()
            }],
            ..CustomResourceDefinitionSpec::default()
        },
        ..CustomResourceDefinition::default()
    };
    crd.metadata.name = Some(format!("{}.{}", model.plural, model.group));
    crd.metadata.labels = Some([(FRAMEWORK_LABEL.to_owned(), model.name.clone())].into());
    Ok(crd)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn the_crd_names_the_manifest_kind_and_its_roles() {
        let text =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/jax/kfop.yaml"))
                .unwrap();
        let model = crate::manifest::model::parse(&text, Path::new("jax")).unwrap();
        let crd = crd(&model).unwrap();
        assert_eq!(crd.metadata.name.as_deref(), Some("jaxjobs.kubeflow.org"));
        let version = &crd.spec.versions[0];
        let scale = version.subresources.as_ref().unwrap().scale.as_ref().unwrap();
        assert_eq!(scale.spec_replicas_path, ".spec.jaxReplicaSpecs.Worker.replicas");
        let value = serde_json::to_value(version.schema.as_ref().unwrap()).unwrap();
        let specs = &value["openAPIV3Schema"]["properties"]["spec"]["properties"]["jaxReplicaSpecs"];
        assert_eq!(
            specs["x-kubernetes-validations"][1]["rule"],
            "self.all(k, k.lowerAscii() in ['worker'])"
        );
        assert_eq!(
            specs["additionalProperties"]["properties"]["restartPolicy"]["enum"][3],
            "ExitCode"
        );
        assert!(
            value.to_string().len() < 256 * 1024,
            "fits kubectl's annotation limit"
        );
    }
}
