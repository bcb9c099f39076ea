//! Admission rules: what the CRD schema adds to the derived spec schema so that the API server
//! itself rejects invalid jobs (Kubeflow does this in a validating webhook; a CRD needs no
//! webhook server, certificates or extra round trip).
//!
//! The rules go into the spec schema through a schemars `transform` rather than kube's
//! `KubeSchema`/`#[x_kube(validation)]`: most of them belong to fields of kfop-runtime's types
//! (the replica spec inside the map, `runPolicy.schedulingPolicy.queue`), which attributes on the
//! user's struct cannot reach, and `KubeSchema`'s expansion names `schemars::Schema` by a path
//! that only resolves when the user depends on schemars directly.
use proc_macro2::TokenStream;
use quote::quote;

use crate::args::{Job, Role, role_list};
use crate::spec::Spec;

/// Additions to the schema object at `pointer` (a JSON pointer into the spec's schema).
#[derive(Debug)]
pub struct Extension {
    pub pointer: String,
    /// `maxProperties`: bounds a map so the API server can bound the cost of its CEL rules.
    pub max_properties: Option<usize>,
    pub rules: Vec<Rule>,
}

/// One `x-kubernetes-validations` entry. The message is static: a `messageExpression` naming
/// the offending keys would concatenate map keys of unbounded length, and the API server rejects
/// the CRD because that expression's estimated cost exceeds its budget a hundredfold.
#[derive(Debug)]
pub struct Rule {
    pub rule: String,
    pub message: String,
}

impl Rule {
    fn new(rule: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            rule: rule.into(),
            message: message.into(),
        }
    }
}

/// Every schema addition for this job kind.
pub fn extensions(job: &Job, spec: &Spec) -> Vec<Extension> {
    let specs = &spec.replica_specs.json;
    let run_policy = &spec.run_policy.json;
    let map = format!("/properties/{specs}");
    let non_negative = |field: &str, fix: &str| Extension {
        pointer: format!("/properties/{run_policy}/properties/{field}"),
        max_properties: None,
        rules: vec![Rule::new(
            "self >= 0",
            format!("spec.{run_policy}.{field} must not be negative: {fix}"),
        )],
    };
    vec![
        Extension {
            pointer: map.clone(),
            max_properties: Some(job.roles.len()),
            rules: replica_type_rules(job, specs),
        },
        Extension {
            pointer: format!("{map}/additionalProperties/properties/replicas"),
            max_properties: None,
            rules: vec![Rule::new(
                "self >= 0",
                format!("spec.{specs}[*].replicas must not be negative: set it to 0 or more"),
            )],
        },
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
        Extension {
            pointer: format!("/properties/{run_policy}/properties/schedulingPolicy/properties/queue"),
            max_properties: None,
            // Kubeflow's exact rule and message.
            rules: vec![Rule::new(
                "self == oldSelf",
                format!("spec.{run_policy}.schedulingPolicy.queue is immutable"),
            )],
        },
    ]
}

/// Rules on the replica-specs map. Keys are matched case-insensitively, as Kubeflow's defaulting
/// (`setTypeNameToCamelCase`, `strings.EqualFold`) and kfop-runtime's `FrameworkInfo::role` do,
/// so `worker` is accepted and normalised to `Worker`.
fn replica_type_rules(job: &Job, specs: &str) -> Vec<Rule> {
    let names = role_list(&job.roles);
    let lower_list = cel_list(job.roles.iter().map(|r| r.name.to_ascii_lowercase()));
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
    let masters: Vec<&Role> = job.roles.iter().filter(|r| r.master).collect();
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
    rules.extend(job.roles.iter().filter_map(|r| bounds_rule(r, specs)));
    rules
}

/// `replicas` of one role within its declared bounds, if it has any (an absent count takes the
/// default, which the macro checked is within them).
fn bounds_rule(role: &Role, specs: &str) -> Option<Rule> {
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

/// The transform function that adds `extensions` to the spec's schema.
pub fn transform_fn(name: &syn::Ident, extensions: &[Extension]) -> TokenStream {
    let calls = extensions.iter().map(|ext| {
        let pointer = &ext.pointer;
        let max = ext
            .max_properties
            .map(proc_macro2::Literal::usize_unsuffixed)
            .map(|n| quote!("maxProperties": #n,));
        let rules = ext.rules.iter().map(|r| {
            let (rule, message) = (&r.rule, &r.message);
            quote!({ "rule": #rule, "message": #message })
        });
        quote! {
            extend(#pointer, ::kfop_runtime::serde_json::json!({
                #max
                "x-kubernetes-validations": [#(#rules),*]
            }));
        }
    });
    quote! {
        /// Adds the admission rules of `#[training_job]` to the spec's schema.
        fn #name(schema: &mut ::kfop_runtime::schemars::Schema) {
            use ::kfop_runtime::serde_json::Value;
            // The CRD generator inlines every subschema, so each pointer resolves.
            let mut extend = |pointer: &str, extension: Value| {
                if let (Some(Value::Object(target)), Value::Object(extension)) =
                    (schema.pointer_mut(pointer), extension)
                {
                    target.extend(extension);
                }
            };
            #(#calls)*
        }
    }
}
