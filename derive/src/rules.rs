//! Admission rules: what the CRD schema adds to the derived spec schema so that the API server
//! itself rejects invalid jobs (Kubeflow does this in a validating webhook; a CRD needs no
//! webhook server, certificates or extra round trip).
//!
//! The spec's rules go into its schema through a schemars `transform` rather than kube's
//! `KubeSchema`/`#[x_kube(validation)]`: most of them belong to fields of kfop-runtime's types
//! (the replica spec inside the map, `runPolicy.schedulingPolicy.queue`), which attributes on the
//! user's struct cannot reach. Only the rules on `metadata.name` need the root schema, which
//! kube-derive builds itself: they go through `#[kube(validation)]`, whose `KubeSchema` expansion
//! names `schemars::Schema` unqualified (the expansion imports `kfop_runtime::__private::*` for
//! it, so the user need not depend on schemars).
//!
//! Rules a kind adds for what the attribute cannot say (a required role, Kubeflow's named
//! container) come from `kfop_runtime::api::rules`, on the struct the kind flattens into its spec.
use proc_macro2::TokenStream;
use quote::quote;

use crate::args::{Job, Role, role_list};
use crate::spec::Spec;

/// The most containers a replica's pod template may list: far above any real pod's, and a bound
/// the API server needs to cost CEL rules over the list (a kind's named-container rule).
const MAX_CONTAINERS: usize = 64;

/// Additions to the schema object at `pointer` (a JSON pointer into the spec's schema).
#[derive(Debug)]
pub struct Extension {
    pub pointer: String,
    /// Schema keywords to add, as the entries of a JSON object.
    pub keywords: TokenStream,
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

/// Rules on the whole object, the only place a rule can read `metadata.name`. The job's name
/// starts every child's name, `<job>-<replica type>-<index>`: a Service name is a DNS-1035 label,
/// so Kubeflow's webhooks require the job name to be one, and mpi-operator checks the longest
/// worker's. (A role whose pods the engine does not create, such as MPI's launcher, a batch Job
/// `<job>-launcher`, is held to the same length: two characters stricter than it needs.) The API
/// server reports these at the root (`<nil>`): a `fieldPath` must be in the schema, which has no
/// `metadata` properties.
pub fn root_rules(job: &Job, spec: &Spec) -> Vec<Rule> {
    let specs = format!("self.spec.{}", spec.replica_specs.json);
    // An absent count is the role's default; the largest default gives the longest index.
    let default_index = job
        .roles
        .iter()
        .map(|r| r.default_replicas.unwrap_or(1) - 1)
        .max()
        .unwrap_or(0)
        .max(0);
    let count = format!("{specs}[k].replicas");
    let last_index = format!("has({count}) ? ({count} > 1 ? {count} - 1 : 0) : {default_index}");
    vec![
        Rule::new(
            "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
            "metadata.name must be a DNS-1035 label (lower-case letters, digits and '-', starting with a letter and ending with a letter or digit): it starts the names of the job's pods and Services; rename the job",
        ),
        Rule::new(
            // 63 characters less the two dashes.
            format!(
                "{specs}.all(k, self.metadata.name.size() + k.size() + string({last_index}).size() <= 61)"
            ),
            "metadata.name is too long for the job's pod and Service names (<name>-<replica type>-<index> must be at most 63 characters): shorten the name",
        ),
    ]
}

/// The `runPolicy.managedBy` values admission accepts: Kubeflow's two controllers (kfop stands
/// in for both; `kfop_runtime::plan::MANAGED_BY_US`) and MultiKueue, as Kubeflow v1.9's and
/// mpi-operator's webhooks allow.
const MANAGED_BY: [&str; 3] = [
    "kubeflow.org/training-operator",
    "kubeflow.org/mpi-operator",
    "kueue.x-k8s.io/multikueue",
];

/// Every schema addition for this job kind.
pub fn extensions(job: &Job, spec: &Spec) -> Vec<Extension> {
    let specs = &spec.replica_specs.json;
    let run_policy = &spec.run_policy.json;
    let map = format!("/properties/{specs}");
    let non_negative = |field: &str, fix: &str| Extension {
        pointer: format!("/properties/{run_policy}/properties/{field}"),
        keywords: TokenStream::new(),
        rules: vec![Rule::new(
            "self >= 0",
            format!("spec.{run_policy}.{field} must not be negative: {fix}"),
        )],
    };
    let roles = proc_macro2::Literal::usize_unsuffixed(job.roles.len());
    vec![
        Extension {
            pointer: map.clone(),
            keywords: quote!("maxProperties": #roles,),
            rules: replica_type_rules(job, specs),
        },
        Extension {
            pointer: format!("{map}/additionalProperties/properties/template"),
            keywords: pod_template_schema(),
            rules: Vec::new(),
        },
        Extension {
            pointer: format!("{map}/additionalProperties/properties/replicas"),
            keywords: TokenStream::new(),
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
            pointer: format!("/properties/{run_policy}/properties/managedBy"),
            keywords: TokenStream::new(),
            rules: vec![Rule::new(
                format!("self in [{}]", MANAGED_BY.map(|v| format!("'{v}'")).join(", ")),
                format!(
                    "spec.{run_policy}.managedBy must be one of {}: kfop reconciles the first two, MultiKueue the last; remove it for kfop",
                    MANAGED_BY.join(", ")
                ),
            )],
        },
        Extension {
            pointer: format!("/properties/{run_policy}"),
            keywords: TokenStream::new(),
            // Kubeflow v1.9's webhook refuses any change; a transition rule sees a runPolicy
            // present before and after.
            rules: vec![Rule::new(
                "has(self.managedBy) == has(oldSelf.managedBy) && (!has(self.managedBy) || self.managedBy == oldSelf.managedBy)",
                format!("spec.{run_policy}.managedBy is immutable: recreate the job to change it"),
            )],
        },
        Extension {
            pointer: format!("/properties/{run_policy}/properties/schedulingPolicy/properties/queue"),
            keywords: TokenStream::new(),
            // Kubeflow's exact rule and message.
            rules: vec![Rule::new(
                "self == oldSelf",
                format!("spec.{run_policy}.schedulingPolicy.queue is immutable"),
            )],
        },
    ]
}

/// The part of a pod template that admission checks, as Kubeflow's webhooks and mpi-operator do:
/// at least one container, each with a name and an image. The rest of the template stays
/// unchecked here (the API server validates the pods it becomes), but for the one default
/// Kubeflow's CRDs (controller-gen's, from the core types) apply inside it: a container port's
/// `protocol` is `TCP` unless given, in `containers` and `initContainers`. Kueue's Workload CRD
/// defaults it too, and a Workload whose pod sets differ from its job's templates never matches
/// the job (Kueue deletes and recreates it forever). The API server applies a default only to a
/// property the schema declares with a type; every other field of a port passes through.
fn pod_template_schema() -> TokenStream {
    let max_containers = proc_macro2::Literal::usize_unsuffixed(MAX_CONTAINERS);
    let ports = quote! {
        "ports": {
            "type": "array",
            "items": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": true,
                "properties": {
                    "protocol": { "type": "string", "default": "TCP" }
                }
            }
        }
    };
    quote! {
        "required": ["spec"],
        "properties": { "spec": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "required": ["containers"],
            "properties": { "containers": {
                "type": "array",
                "minItems": 1,
                "maxItems": #max_containers,
                "items": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": true,
                    "required": ["name", "image"],
                    "properties": {
                        // A container name is a DNS-1123 label.
                        "name": { "type": "string", "maxLength": 63 },
                        "image": { "type": "string", "minLength": 1 },
                        #ports
                    }
                }
            },
            "initContainers": {
                "type": "array",
                "items": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": true,
                    "properties": { #ports }
                }
            } }
        } },
    }
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
        let keywords = &ext.keywords;
        let rules = (!ext.rules.is_empty()).then(|| {
            let rules = ext.rules.iter().map(|r| {
                let (rule, message) = (&r.rule, &r.message);
                quote!({ "rule": #rule, "message": #message })
            });
            quote!("x-kubernetes-validations": [#(#rules),*])
        });
        quote! {
            extend(#pointer, ::kfop_runtime::serde_json::json!({ #keywords #rules }));
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
