//! Additions to the spec's schema: the replica-specs map's keys and counts, the checked part of
//! every pod template, the run policy's bounds and immutable fields, and the kind's required
//! container and roles.
use serde_json::{Map, Value, json};

use crate::rule::{Rule, named_container, required_role};
use crate::shape::{RoleShape, Shape};

/// The most containers a replica's pod template may list: far above any real pod's, and a bound
/// the API server needs to cost CEL rules over the list (the named-container rule).
const MAX_CONTAINERS: usize = 64;

/// The `runPolicy.managedBy` values admission accepts: Kubeflow's two controllers (kfop stands
/// in for both) and MultiKueue, as Kubeflow v1.9's and mpi-operator's webhooks allow.
const MANAGED_BY: [&str; 3] = [
    "kubeflow.org/training-operator",
    "kubeflow.org/mpi-operator",
    "kueue.x-k8s.io/multikueue",
];

/// Additions to the schema object at `pointer` (a JSON pointer into the spec's schema; empty
/// for the spec itself).
#[derive(Clone, Debug, PartialEq)]
pub struct Extension {
    pub pointer: String,
    /// Schema keywords to add.
    pub keywords: Map<String, Value>,
    /// Rules appended to the object's `x-kubernetes-validations`.
    pub rules: Vec<Rule>,
}

impl Extension {
    fn rules(pointer: String, rules: Vec<Rule>) -> Self {
        Self {
            pointer,
            keywords: Map::new(),
            rules,
        }
    }
}

/// Adds every extension of `shape` to `spec`, the spec's schema as the CRD generator writes it
/// (every subschema inlined, so each pointer resolves). Rules already on an object stay first.
pub fn extend_spec_schema(spec: &mut Map<String, Value>, shape: &Shape) {
    for extension in extensions(shape) {
        let Some(target) = object_at(spec, &extension.pointer) else {
            continue;
        };
        target.extend(extension.keywords);
        if extension.rules.is_empty() {
            continue;
        }
        let rules = target
            .entry("x-kubernetes-validations")
            .or_insert_with(|| json!([]));
        if let Value::Array(rules) = rules {
            rules.extend(extension.rules.iter().map(Rule::to_json));
        }
    }
}

/// The object at `pointer` below `root`, if every step is an object.
fn object_at<'a>(root: &'a mut Map<String, Value>, pointer: &str) -> Option<&'a mut Map<String, Value>> {
    pointer
        .split('/')
        .filter(|step| !step.is_empty())
        .try_fold(root, |object, step| object.get_mut(step)?.as_object_mut())
}

/// Every schema addition for the kind.
pub fn extensions(shape: &Shape) -> Vec<Extension> {
    let specs = &shape.replica_specs;
    let run_policy = &shape.run_policy;
    let map = format!("/properties/{specs}");
    let non_negative = |field: &str, fix: &str| {
        Extension::rules(
            format!("/properties/{run_policy}/properties/{field}"),
            vec![Rule::new(
                "self >= 0",
                format!("spec.{run_policy}.{field} must not be negative: {fix}"),
            )],
        )
    };
    let mut spec_rules: Vec<Rule> = shape
        .required_container
        .iter()
        .map(|container| named_container(specs, container))
        .collect();
    spec_rules.extend(
        shape
            .roles
            .iter()
            .filter(|r| r.required)
            .map(|r| required_role(specs, &r.name)),
    );
    let mut all = vec![
        Extension {
            pointer: map.clone(),
            keywords: object(json!({ "maxProperties": shape.roles.len() })),
            rules: replica_type_rules(shape),
        },
        Extension {
            pointer: format!("{map}/additionalProperties/properties/template"),
            keywords: object(pod_template_schema()),
            rules: Vec::new(),
        },
        Extension::rules(
            format!("{map}/additionalProperties/properties/replicas"),
            vec![Rule::new(
                "self >= 0",
                format!("spec.{specs}[*].replicas must not be negative: set it to 0 or more"),
            )],
        ),
        non_negative(
            "backoffLimit",
            "set it to 0 or more (the container restarts allowed before the job fails)",
        ),
        non_negative(
            "activeDeadlineSeconds",
            "set it to 0 or more seconds, or remove it for no deadline",
        ),
        non_negative(
            "ttlSecondsAfterFinished",
            "set it to 0 or more seconds, or remove it to keep finished jobs",
        ),
        Extension::rules(
            format!("/properties/{run_policy}/properties/managedBy"),
            vec![Rule::new(
                format!("self in [{}]", MANAGED_BY.map(|v| format!("'{v}'")).join(", ")),
                format!(
                    "spec.{run_policy}.managedBy must be one of {}: kfop reconciles the first two, MultiKueue the last; remove it for kfop",
                    MANAGED_BY.join(", ")
                ),
            )],
        ),
        // Kubeflow v1.9's webhook refuses any change; a transition rule sees a runPolicy
        // present before and after.
        Extension::rules(
            format!("/properties/{run_policy}"),
            vec![Rule::new(
                "has(self.managedBy) == has(oldSelf.managedBy) && (!has(self.managedBy) || self.managedBy == oldSelf.managedBy)",
                format!("spec.{run_policy}.managedBy is immutable: recreate the job to change it"),
            )],
        ),
        // Kubeflow's exact rule and message.
        Extension::rules(
            format!("/properties/{run_policy}/properties/schedulingPolicy/properties/queue"),
            vec![Rule::new(
                "self == oldSelf",
                format!("spec.{run_policy}.schedulingPolicy.queue is immutable"),
            )],
        ),
    ];
    if !spec_rules.is_empty() {
        all.push(Extension::rules(String::new(), spec_rules));
    }
    all
}

/// `value`'s entries (a JSON object literal).
fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The part of a pod template that admission checks, as Kubeflow's webhooks and mpi-operator do:
/// at least one container, each with a name and an image. The rest of the template stays
/// unchecked here (the API server validates the pods it becomes), but for the one default
/// Kubeflow's CRDs (controller-gen's, from the core types) apply inside it: a container port's
/// `protocol` is `TCP` unless given, in `containers` and `initContainers`. Kueue's Workload CRD
/// defaults it too, and a Workload whose pod sets differ from its job's templates never matches
/// the job (Kueue deletes and recreates it forever). The API server applies a default only to a
/// property the schema declares with a type; every other field of a port passes through.
fn pod_template_schema() -> Value {
    let ports = json!({
        "type": "array",
        "items": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": {
                "protocol": { "type": "string", "default": "TCP" }
            }
        }
    });
    json!({
        "required": ["spec"],
        "properties": { "spec": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "required": ["containers"],
            "properties": {
                "containers": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": MAX_CONTAINERS,
                    "items": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": true,
                        "required": ["name", "image"],
                        "properties": {
                            // A container name is a DNS-1123 label.
                            "name": { "type": "string", "maxLength": 63 },
                            "image": { "type": "string", "minLength": 1 },
                            "ports": ports,
                        }
                    }
                },
                "initContainers": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": true,
                        "properties": { "ports": ports }
                    }
                }
            }
        } },
    })
}

/// Rules on the replica-specs map. Keys are matched case-insensitively, as Kubeflow's defaulting
/// (`setTypeNameToCamelCase`, `strings.EqualFold`) and kfop-runtime's `FrameworkInfo::role` do,
/// so `worker` is accepted and normalised to `Worker`.
fn replica_type_rules(shape: &Shape) -> Vec<Rule> {
    let specs = &shape.replica_specs;
    let names = shape.role_names();
    let lower_list = cel_list(shape.roles.iter().map(|r| r.name.to_ascii_lowercase()));
    let mut rules = vec![
        Rule::new(
            "self.size() > 0",
            format!("spec.{specs} must not be empty: add at least one of {names}"),
        ),
        Rule::new(
            format!("self.all(k, k.lowerAscii() in {lower_list})"),
            format!("spec.{specs} has an unknown replica type: use only {names} (any letter case)"),
        ),
        Rule::new(
            format!("{lower_list}.all(r, self.filter(k, k.lowerAscii() == r).size() <= 1)"),
            format!(
                "spec.{specs} names a replica type twice in different letter case (e.g. Worker and worker): keep one key per replica type"
            ),
        ),
    ];
    let masters: Vec<&RoleShape> = shape.roles.iter().filter(|r| r.master).collect();
    if masters.len() > 1 {
        let list = cel_list(masters.iter().map(|r| r.name.to_ascii_lowercase()));
        let names = masters
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        rules.push(Rule::new(
            format!("self.filter(k, k.lowerAscii() in {list}).size() <= 1"),
            format!("spec.{specs} may have only one of {names}: keep one and remove the others"),
        ));
    }
    rules.extend(shape.roles.iter().filter_map(|r| bounds_rule(r, specs)));
    rules
}

/// `replicas` of one role within its declared bounds, if it has any (an absent count takes the
/// default, which the declaration's checks keep within them).
fn bounds_rule(role: &RoleShape, specs: &str) -> Option<Rule> {
    let (check, must) = match (role.min_replicas, role.max_replicas) {
        (Some(min), Some(max)) if min == max => (
            format!("self[k].replicas == {min}"),
            format!("be {min}: set it to {min}"),
        ),
        (Some(min), Some(max)) => (
            format!("self[k].replicas >= {min} && self[k].replicas <= {max}"),
            format!("be between {min} and {max}: set it within that range"),
        ),
        (Some(min), None) => (
            format!("self[k].replicas >= {min}"),
            format!("be at least {min}: set it to {min} or more"),
        ),
        (None, Some(max)) => (
            format!("self[k].replicas <= {max}"),
            format!("be at most {max}: set it to {max} or less"),
        ),
        (None, None) => return None,
    };
    let name = &role.name;
    let lower = name.to_ascii_lowercase();
    Some(Rule::new(
        format!("self.all(k, k.lowerAscii() != '{lower}' || !has(self[k].replicas) || ({check}))"),
        format!("spec.{specs}.{name}.replicas must {must}"),
    ))
}

/// A CEL list literal of strings (role names are identifiers, so they need no escaping).
fn cel_list(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.map(|i| format!("'{i}'")).collect();
    format!("[{}]", items.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> Shape {
        Shape {
            replica_specs: "tfReplicaSpecs".into(),
            run_policy: "runPolicy".into(),
            required_container: Some("tensorflow".into()),
            roles: vec![
                RoleShape {
                    name: "Chief".into(),
                    master: true,
                    max_replicas: Some(1),
                    ..RoleShape::default()
                },
                RoleShape {
                    name: "Master".into(),
                    master: true,
                    required: true,
                    ..RoleShape::default()
                },
            ],
        }
    }

    #[test]
    fn rules_land_after_those_already_on_an_object() {
        let mut spec = object(json!({
            "x-kubernetes-validations": [{ "rule": "self.a", "message": "user rule" }],
            "properties": {
                "tfReplicaSpecs": { "type": "object" },
                "runPolicy": { "type": "object", "properties": {} },
            },
        }));
        extend_spec_schema(&mut spec, &shape());
        let rules = spec["x-kubernetes-validations"].as_array().unwrap();
        let names: Vec<&str> = rules.iter().map(|r| r["message"].as_str().unwrap()).collect();
        assert_eq!(names[0], "user rule");
        assert!(names[1].contains("container named tensorflow"), "{names:?}");
        assert!(names[2].contains("Master is required"), "{names:?}");
        let map = &spec["properties"]["tfReplicaSpecs"];
        assert_eq!(map["maxProperties"], 2);
        let map_rules = map["x-kubernetes-validations"].as_array().unwrap();
        assert_eq!(map_rules.len(), 5, "3 key rules, one-master, Chief's bound");
        assert_eq!(
            map_rules[4]["rule"],
            "self.all(k, k.lowerAscii() != 'chief' || !has(self[k].replicas) || (self[k].replicas <= 1))"
        );
        // A pointer that does not resolve (no `managedBy` property here) adds nothing.
        assert!(
            spec["properties"]["runPolicy"]["properties"]
                .as_object()
                .unwrap()
                .is_empty()
        );
    }
}
