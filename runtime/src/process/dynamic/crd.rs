//! The CRD of a run-time job kind, built from its manifest with the schema settings kube-derive
//! uses for compiled kinds: the shared types' schemas (replica spec, run policy, status, with
//! their own admission rules), the additions `kfop-crd-rules` makes for `#[training_job]` too,
//! printer columns, and the status and scale subresources.
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceDefinitionNames,
    CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, CustomResourceSubresourceScale,
    CustomResourceSubresourceStatus, CustomResourceSubresources, CustomResourceValidation, JSONSchemaProps,
};
use kfop_crd_rules::{
    DEFAULT_CATEGORIES, PRINTER_COLUMNS, RoleShape, Rule, Shape, description, extend_spec_schema, root_rules,
    scale_paths,
};
use kube::core::schema::{OptionalEnum, OptionalIntOrString, StructuralSchemaRewriter};
use schemars::JsonSchema;
use schemars::transform::{AddNullable, Transform};
use serde_json::{Value, json};

use crate::api::{JobStatus, ReplicaSpec, RunPolicy};
use crate::manifest::model::Model;

/// The label every kfop-installed run-time CRD carries, naming the Framework it came from.
pub const FRAMEWORK_LABEL: &str = "kfop.dev/framework";

/// A type's schema with the settings kube-derive generates with (every subschema inlined); its
/// transforms come once, over the whole schema, in [`rewrite`].
fn schema_of<T: JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut value = generator.into_root_schema_for::<T>().to_value();
    if let Some(object) = value.as_object_mut() {
        object.remove("title");
    }
    value
}

/// The transforms kube-derive's generator applies to a kind's whole schema, after the spec's
/// own (the rule additions): a structural schema, whose `required` lists are sorted.
fn rewrite(value: Value) -> Result<Value, serde_json::Error> {
    let mut schema = schemars::Schema::try_from(value)?;
    AddNullable::default().transform(&mut schema);
    StructuralSchemaRewriter.transform(&mut schema);
    OptionalEnum.transform(&mut schema);
    OptionalIntOrString.transform(&mut schema);
    Ok(schema.to_value())
}

/// What the shared rule generator needs of the manifest.
fn shape(model: &Model) -> Shape {
    Shape {
        replica_specs: model.replica_specs_field.clone(),
        run_policy: "runPolicy".to_owned(),
        required_container: model.container_required.then(|| model.container.clone()),
        roles: model
            .roles
            .iter()
            .map(|r| RoleShape {
                name: r.name.clone(),
                master: r.master,
                required: r.required,
                default_replicas: Some(r.default_replicas),
                min_replicas: r.min_replicas,
                max_replicas: r.max_replicas,
            })
            .collect(),
    }
}

/// The CRD `model` describes, as `#[training_job]` writes it for the same manifest compiled by
/// `kfop gen` (the test in `examples/jax/tests/runtime.rs` holds them equal); `FRAMEWORK_LABEL`
/// names the Framework that installed it.
pub fn crd(model: &Model) -> Result<CustomResourceDefinition, serde_json::Error> {
    let shape = shape(model);
    let field = &model.replica_specs_field;
    let mut run_policy = schema_of::<RunPolicy>();
    run_policy["default"] = json!({});
    let mut status = schema_of::<JobStatus>();
    status["nullable"] = json!(true);
    let mut spec = json!({
        "type": "object",
        "required": [field],
        "properties": {
            field: {
                "type": "object",
                "additionalProperties": schema_of::<ReplicaSpec>(),
            },
            "runPolicy": run_policy,
        },
    });
    if let Some(spec) = spec.as_object_mut() {
        extend_spec_schema(spec, &shape);
    }
    let root_rules: Vec<Value> = root_rules(&shape).iter().map(Rule::to_json).collect();
    let schema = json!({
        "type": "object",
        "title": model.kind,
        "description": description(&model.kind, &model.group, &model.version, &model.framework_name),
        "required": ["spec"],
        "properties": { "spec": spec, "status": status },
        "x-kubernetes-validations": root_rules,
    });
    let schema: JSONSchemaProps = serde_json::from_value(rewrite(schema)?)?;
    let scale = model.scale.as_ref().map(|role| {
        let [spec_replicas_path, status_replicas_path, selector] = scale_paths(field, role);
        CustomResourceSubresourceScale {
            spec_replicas_path,
            status_replicas_path,
            label_selector_path: Some(selector),
        }
    });
    let columns = PRINTER_COLUMNS
        .iter()
        .map(|(name, type_, path)| CustomResourceColumnDefinition {
            name: (*name).to_owned(),
            type_: (*type_).to_owned(),
            json_path: (*path).to_owned(),
            ..CustomResourceColumnDefinition::default()
        })
        .collect();
    let mut crd = CustomResourceDefinition {
        spec: CustomResourceDefinitionSpec {
            group: model.group.clone(),
            names: CustomResourceDefinitionNames {
                kind: model.kind.clone(),
                plural: model.plural.clone(),
                singular: Some(model.kind.to_lowercase()),
                short_names: (!model.short_names.is_empty()).then(|| model.short_names.clone()),
                categories: Some(DEFAULT_CATEGORIES.map(str::to_owned).to_vec()),
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
