//! Schema paths: every property path of a Kubeflow CRD's `openAPIV3Schema`, looked up in kfop's
//! schema of the same kind and version, to show that each field Kubeflow's API accepts kfop's
//! accepts too (`tests/schemas.rs` runs it over Kubeflow's shipped CRDs).
//!
//! A path names properties with `.`, an array's items with `[*]` and a map's values with `{*}`
//! (`spec.elasticPolicy.metrics[*].type`, `spec.paddleReplicaSpecs{*}.replicas`). kfop's schema
//! holds a path when it declares it with a type that accepts Kubeflow's values, or when the path
//! is below a node that keeps unknown fields (`x-kubernetes-preserve-unknown-fields: true`, or
//! `additionalProperties: true`): the API server stores it as given. A path it does not hold the
//! API server prunes, or rejects under strict field validation (kubectl's default).
use serde_json::Value;

/// The API server's own fields at a CRD schema's root: every custom resource has them whether
/// the schema lists them or not (apiextensions' structural schema rules).
pub const IMPLICIT_ROOT_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// How kfop's schema holds one path of Kubeflow's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// Declared, with a type accepting Kubeflow's values (or one of the two has no type).
    Declared,
    /// Below a node of kfop's that keeps unknown fields.
    Preserved,
    /// One of [`IMPLICIT_ROOT_FIELDS`] (or below it).
    Implicit,
    /// Not in kfop's schema: the API server drops it.
    Missing,
    /// Declared with a type that refuses some of Kubeflow's values.
    TypeDiffers { kubeflow: String, kfop: String },
    /// Kubeflow's node keeps unknown fields and kfop's declares the path but drops them.
    UnknownFieldsDropped,
}

impl Held {
    /// Whether this is a difference: kfop refuses or drops what Kubeflow accepts.
    pub fn is_difference(&self) -> bool {
        matches!(
            self,
            Held::Missing | Held::TypeDiffers { .. } | Held::UnknownFieldsDropped
        )
    }

    /// Both sides' values as a declaration matches them (`kubeflow`, `kfop`): the types, with
    /// `<absent>` for a path kfop lacks and `preserve-unknown-fields` / `<dropped>` for unknown
    /// fields only Kubeflow keeps. `None` unless [`Self::is_difference`].
    pub fn values(&self, kubeflow_type: &str) -> Option<(String, String)> {
        match self {
            Held::Missing => Some((kubeflow_type.to_owned(), "<absent>".to_owned())),
            Held::TypeDiffers { kubeflow, kfop } => Some((kubeflow.clone(), kfop.clone())),
            Held::UnknownFieldsDropped => {
                Some(("preserve-unknown-fields".to_owned(), "<dropped>".to_owned()))
            }
            Held::Declared | Held::Preserved | Held::Implicit => None,
        }
    }
}

/// One path of Kubeflow's schema and how kfop's holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathResult {
    pub path: String,
    /// Kubeflow's type at the path ([`schema_type`]; `any` when it has none).
    pub kubeflow_type: String,
    pub held: Held,
}

/// Every path of `kubeflow` (an `openAPIV3Schema`, as JSON) in walk order, parents before their
/// children, each looked up in `kfop`'s.
pub fn compare(kubeflow: &Value, kfop: &Value) -> Vec<PathResult> {
    let mut out = Vec::new();
    walk(kubeflow, Cursor::Root(kfop), "", &mut out);
    out
}

/// The type a schema node accepts: `int-or-string` for `x-kubernetes-int-or-string`, else its
/// `type`; `None` for a node without one (it accepts any type).
pub fn schema_type(node: &Value) -> Option<&str> {
    if flag(node, "x-kubernetes-int-or-string") {
        return Some("int-or-string");
    }
    node.get("type").and_then(Value::as_str)
}

/// Whether a node of type `kfop` accepts every value a node of type `kubeflow` does.
pub fn type_accepts(kfop: &str, kubeflow: &str) -> bool {
    kfop == kubeflow
        || (kfop == "int-or-string" && matches!(kubeflow, "integer" | "string"))
        || (kfop == "number" && kubeflow == "integer")
}

/// Where the walk stands in kfop's schema.
#[derive(Debug, Clone, Copy)]
enum Cursor<'a> {
    /// kfop's root schema (where the implicit fields are).
    Root(&'a Value),
    Node(&'a Value),
    /// Below a node that keeps unknown fields.
    Preserved,
    Implicit,
    Missing,
}

impl<'a> Cursor<'a> {
    fn property(self, name: &str) -> Self {
        match self {
            Cursor::Root(node) => match Cursor::Node(node).property(name) {
                Cursor::Missing if IMPLICIT_ROOT_FIELDS.contains(&name) => Cursor::Implicit,
                found => found,
            },
            Cursor::Node(node) => match node.get("properties").and_then(|p| p.get(name)) {
                Some(child) => Cursor::Node(child),
                None => Cursor::Node(node).values(),
            },
            other => other,
        }
    }

    fn items(self) -> Self {
        match self {
            Cursor::Root(node) | Cursor::Node(node) => match node.get("items") {
                Some(items) if items.is_object() => Cursor::Node(items),
                _ if keeps_unknown(node) => Cursor::Preserved,
                _ => Cursor::Missing,
            },
            other => other,
        }
    }

    /// A map's values (`additionalProperties`), or a property the node does not list.
    fn values(self) -> Self {
        match self {
            Cursor::Root(node) | Cursor::Node(node) => match node.get("additionalProperties") {
                Some(values) if values.is_object() => Cursor::Node(values),
                _ if keeps_unknown(node) => Cursor::Preserved,
                _ => Cursor::Missing,
            },
            other => other,
        }
    }

    fn held(self, kubeflow: &Value) -> Held {
        match self {
            Cursor::Root(node) | Cursor::Node(node) => {
                if let (Some(theirs), Some(ours)) = (schema_type(kubeflow), schema_type(node))
                    && !type_accepts(ours, theirs)
                {
                    return Held::TypeDiffers {
                        kubeflow: theirs.to_owned(),
                        kfop: ours.to_owned(),
                    };
                }
                if keeps_unknown(kubeflow) && !keeps_unknown(node) {
                    Held::UnknownFieldsDropped
                } else {
                    Held::Declared
                }
            }
            Cursor::Preserved => Held::Preserved,
            Cursor::Implicit => Held::Implicit,
            Cursor::Missing => Held::Missing,
        }
    }
}

fn walk(kubeflow: &Value, kfop: Cursor<'_>, path: &str, out: &mut Vec<PathResult>) {
    let mut visit = |child: &Value, cursor: Cursor<'_>, child_path: String| {
        out.push(PathResult {
            kubeflow_type: schema_type(child).unwrap_or("any").to_owned(),
            held: cursor.held(child),
            path: child_path.clone(),
        });
        walk(child, cursor, &child_path, out);
    };
    if let Some(properties) = kubeflow.get("properties").and_then(Value::as_object) {
        for (name, child) in properties {
            let child_path = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            visit(child, kfop.property(name), child_path);
        }
    }
    if let Some(items) = kubeflow.get("items").filter(|i| i.is_object()) {
        visit(items, kfop.items(), format!("{path}[*]"));
    }
    match kubeflow.get("additionalProperties") {
        Some(values) if values.is_object() => visit(values, kfop.values(), format!("{path}{{*}}")),
        // Any value of any key: kfop must keep them too.
        Some(Value::Bool(true)) => visit(&Value::Null, kfop.values(), format!("{path}{{*}}")),
        _ => {}
    }
}

/// Whether a node keeps fields its schema does not list.
fn keeps_unknown(node: &Value) -> bool {
    flag(node, "x-kubernetes-preserve-unknown-fields")
        || node.get("additionalProperties") == Some(&Value::Bool(true))
}

fn flag(node: &Value, key: &str) -> bool {
    node.get(key).and_then(Value::as_bool).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn held(kubeflow: Value, kfop: Value) -> Vec<(String, Held)> {
        compare(&kubeflow, &kfop)
            .into_iter()
            .map(|r| (r.path, r.held))
            .collect()
    }

    fn obj(properties: Value) -> Value {
        json!({ "type": "object", "properties": properties })
    }

    #[test]
    fn a_property_kfop_lacks_is_missing_with_everything_below_it() {
        let kubeflow = obj(json!({
            "spec": obj(json!({
                "runPolicy": obj(json!({ "suspend": { "type": "boolean" } })),
                "elasticPolicy": obj(json!({ "maxReplicas": { "type": "integer" } })),
            })),
        }));
        let kfop = obj(json!({
            "spec": obj(json!({ "runPolicy": obj(json!({ "suspend": { "type": "boolean" } })) })),
        }));
        assert_eq!(
            held(kubeflow, kfop),
            [
                ("spec".to_owned(), Held::Declared),
                ("spec.elasticPolicy".to_owned(), Held::Missing),
                ("spec.elasticPolicy.maxReplicas".to_owned(), Held::Missing),
                ("spec.runPolicy".to_owned(), Held::Declared),
                ("spec.runPolicy.suspend".to_owned(), Held::Declared),
            ]
        );
    }

    #[test]
    fn arrays_and_maps_are_walked_through_items_and_values() {
        let kubeflow = obj(json!({
            "specs": {
                "type": "object",
                "additionalProperties": obj(json!({
                    "replicas": { "type": "integer" },
                    "ports": { "type": "array", "items": obj(json!({ "port": { "type": "integer" } })) },
                })),
            },
        }));
        let kfop = obj(json!({
            "specs": {
                "type": "object",
                "additionalProperties": obj(json!({
                    "replicas": { "type": "integer" },
                    "ports": { "type": "array" },
                })),
            },
        }));
        assert_eq!(
            held(kubeflow, kfop),
            [
                ("specs".to_owned(), Held::Declared),
                ("specs{*}".to_owned(), Held::Declared),
                ("specs{*}.ports".to_owned(), Held::Declared),
                ("specs{*}.ports[*]".to_owned(), Held::Missing),
                ("specs{*}.ports[*].port".to_owned(), Held::Missing),
                ("specs{*}.replicas".to_owned(), Held::Declared),
            ]
        );
    }

    #[test]
    fn a_node_keeping_unknown_fields_holds_what_it_does_not_declare() {
        let kubeflow = obj(json!({
            "template": obj(json!({
                "metadata": obj(json!({ "labels": { "type": "object" } })),
                "spec": obj(json!({ "containers": { "type": "array", "items": obj(json!({
                    "name": { "type": "string" },
                    "ports": { "type": "array", "items": obj(json!({})) },
                })) } })),
            })),
            "labels": { "type": "object", "additionalProperties": { "type": "string" } },
        }));
        let kfop = obj(json!({
            "template": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": true,
                "properties": { "spec": obj(json!({ "containers": { "type": "array", "items": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": true,
                    "properties": { "name": { "type": "integer" } },
                } } })) },
            },
            "labels": { "type": "object", "additionalProperties": true },
        }));
        let results = held(kubeflow, kfop);
        let at = |path: &str| results.iter().find(|(p, _)| p == path).map(|(_, h)| h.clone());
        assert_eq!(at("template.metadata"), Some(Held::Preserved));
        assert_eq!(at("template.metadata.labels"), Some(Held::Preserved));
        assert_eq!(at("template.spec.containers[*]"), Some(Held::Declared));
        // A declared path below a preserving node still has its type checked.
        assert_eq!(
            at("template.spec.containers[*].name"),
            Some(Held::TypeDiffers {
                kubeflow: "string".to_owned(),
                kfop: "integer".to_owned()
            })
        );
        assert_eq!(at("template.spec.containers[*].ports[*]"), Some(Held::Preserved));
        assert_eq!(at("labels{*}"), Some(Held::Preserved));
    }

    #[test]
    fn int_or_string_is_a_type_of_its_own() {
        let quantity = json!({ "anyOf": [{ "type": "integer" }, { "type": "string" }], "x-kubernetes-int-or-string": true });
        let kubeflow = obj(json!({ "a": quantity, "b": quantity, "c": { "type": "integer" } }));
        let kfop = obj(json!({ "a": quantity, "b": { "type": "integer" }, "c": quantity }));
        assert_eq!(
            held(kubeflow, kfop),
            [
                ("a".to_owned(), Held::Declared),
                (
                    "b".to_owned(),
                    Held::TypeDiffers {
                        kubeflow: "int-or-string".to_owned(),
                        kfop: "integer".to_owned()
                    }
                ),
                // kfop's is wider: every integer Kubeflow takes, it takes.
                ("c".to_owned(), Held::Declared),
            ]
        );
    }

    #[test]
    fn root_fields_of_the_api_server_are_implicit_and_only_at_the_root() {
        let kubeflow = obj(json!({
            "apiVersion": { "type": "string" },
            "kind": { "type": "string" },
            "metadata": { "type": "object" },
            "spec": obj(json!({ "kind": { "type": "string" } })),
        }));
        let kfop = obj(json!({ "spec": obj(json!({})) }));
        assert_eq!(
            held(kubeflow, kfop),
            [
                ("apiVersion".to_owned(), Held::Implicit),
                ("kind".to_owned(), Held::Implicit),
                ("metadata".to_owned(), Held::Implicit),
                ("spec".to_owned(), Held::Declared),
                ("spec.kind".to_owned(), Held::Missing),
            ]
        );
    }

    #[test]
    fn unknown_fields_kubeflow_keeps_must_be_kept() {
        let kubeflow = obj(json!({
            "a": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
            "b": { "type": "object", "additionalProperties": true },
        }));
        let kfop = obj(json!({
            "a": { "type": "object" },
            "b": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
        }));
        assert_eq!(
            held(kubeflow, kfop),
            [
                ("a".to_owned(), Held::UnknownFieldsDropped),
                ("b".to_owned(), Held::Declared),
                ("b{*}".to_owned(), Held::Preserved),
            ]
        );
        assert_eq!(
            Held::UnknownFieldsDropped.values("object"),
            Some(("preserve-unknown-fields".to_owned(), "<dropped>".to_owned()))
        );
        assert_eq!(
            Held::Missing.values("integer"),
            Some(("integer".to_owned(), "<absent>".to_owned()))
        );
        assert_eq!(Held::Preserved.values("integer"), None);
    }
}
