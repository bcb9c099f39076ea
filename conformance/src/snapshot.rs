//! What one side shows of a case's job at one moment, as JSON normalized so that two sides on
//! one plane compare equal when the operators behaved the same: namespace names become `<ns>`,
//! UIDs `<uid>`, timestamps whether they are set, generated IPs and names a placeholder; lists
//! whose order carries no meaning (pods, services, containers, env, conditions, events) become
//! maps keyed by name, so a difference names its field.
//!
//! ```text
//! job:      metadata (labels, annotations, finalizers), spec, status (conditions by type with
//!           conditionOrder, replicaStatuses, which of startTime/completionTime/lastReconcileTime are set)
//! pods:     <name> -> labels, annotations (but kwok's and ours), ownerReferences, phase, spec
//! services: <name> -> labels, annotations, ownerReferences, spec
//! owned:    <Kind>/<name> -> the ConfigMaps, Secrets, batch Jobs, HPAs and PodGroups it controls
//! events:   "<type> <reason>: <message>" -> true, about the job
//! meta:     eventsRecorded (events about the job, repeats counted): context, not compared
//! ```
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::cases::{Case, RANDOM_SUFFIX};
use crate::side::Side;
use crate::{Error, Result};

/// The label both operators put on every pod and service of a job.
const JOB_NAME_LABEL: &str = "training.kubeflow.org/job-name";

/// Annotation prefixes that are the test's or kwok's, not an operator's.
const FOREIGN_ANNOTATIONS: [&str; 2] = ["kwok.kfop.dev/", "kwok.x-k8s.io/"];

/// The part of a snapshot that is context for the comparison, not compared.
pub const META: &str = "meta";

/// How many events about the job a side had recorded, repeats counted.
pub fn events_recorded(snapshot: &Value) -> u64 {
    snapshot[META]["eventsRecorded"].as_u64().unwrap_or(0)
}

/// How much to read: settling polls the cheap part; the recorded snapshot has everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// The job, its pods, services and events.
    Light,
    /// Also the owned objects of other kinds.
    Full,
}

/// The normalized snapshot of `case`'s job on `side`.
pub async fn capture(side: &Side, case: &Case, depth: Depth) -> Result<Value> {
    let ns = side.namespace.as_str();
    let by_job = ListParams::default().labels(&format!("{JOB_NAME_LABEL}={}", case.name));
    let jobs: Api<DynamicObject> = Api::namespaced_with(side.client.clone(), ns, &case.kind.resource());
    let job = jobs
        .get_opt(&case.name)
        .await
        .map_err(Error::kube(format!("reading {} {}", case.kind.kind, case.name)))?;
    let pods: Vec<Pod> = list(side, &by_job, "pods").await?;
    // mpi-operator's Service has only an `app` label: services the job controls count too.
    let services: Vec<Service> = list::<Service>(side, &ListParams::default(), "services")
        .await?
        .into_iter()
        .filter(|s| {
            let labelled = s
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.get(JOB_NAME_LABEL) == Some(&case.name));
            labelled || controlled_by(&s.metadata, case)
        })
        .collect();
    let (events, recorded) = events(side, case).await?;
    let mut snapshot = json!({
        "meta": { "eventsRecorded": recorded },
        "job": job.map(job_view),
        "pods": pods_keyed(pods),
        "services": keyed(services.into_iter().map(|s| (name(&s.metadata), service_view(s)))),
        "events": events,
    });
    if depth == Depth::Full {
        snapshot["owned"] = owned(side, case).await?;
    }
    Ok(normalize(snapshot, ns))
}

async fn list<K>(side: &Side, params: &ListParams, what: &str) -> Result<Vec<K>>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(side.client.clone(), &side.namespace);
    Ok(api
        .list(params)
        .await
        .map_err(Error::kube(format!("listing {what} in {}", side.namespace)))?
        .items)
}

fn name(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

/// A pod's name, or for one named from a `generateName` (a batch Job's), that prefix and
/// [`RANDOM_SUFFIX`].
fn pod_key(meta: &ObjectMeta) -> String {
    let name = name(meta);
    match meta.generate_name.as_deref() {
        Some(prefix) if !prefix.is_empty() && name.starts_with(prefix) => format!("{prefix}{RANDOM_SUFFIX}"),
        _ => name,
    }
}

/// Pods by [`pod_key`]; a key repeated (a batch Job's retried pod) gets `#<n>` in creation
/// order.
fn pods_keyed(mut pods: Vec<Pod>) -> Value {
    pods.sort_by(|a, b| {
        let created = |p: &Pod| p.metadata.creation_timestamp.clone().map(|t| t.0);
        created(a)
            .cmp(&created(b))
            .then_with(|| name(&a.metadata).cmp(&name(&b.metadata)))
    });
    let mut by_key = Map::new();
    for pod in pods {
        let key = pod_key(&pod.metadata);
        let mut unique = key.clone();
        let mut n = 1;
        while by_key.contains_key(&unique) {
            n += 1;
            unique = format!("{key}#{n}");
        }
        by_key.insert(unique, pod_view(pod));
    }
    Value::Object(by_key)
}

/// Whether the job `case` is `meta`'s controller (by kind and name; the UID is per side).
fn controlled_by(meta: &ObjectMeta, case: &Case) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == case.kind.kind && o.name == case.name)
}

fn keyed(items: impl Iterator<Item = (String, Value)>) -> Value {
    Value::Object(items.collect())
}

fn to_value(value: impl Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// Labels, annotations (without the test's and kwok's), finalizers and owner references
/// (kind, name and flags; the UID is per side).
fn meta_view(meta: &ObjectMeta) -> Value {
    let annotations: Map<String, Value> = meta
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| !FOREIGN_ANNOTATIONS.iter().any(|p| k.starts_with(p)))
        .map(|(k, v)| (k.clone(), Value::from(v.clone())))
        .collect();
    let owners: Vec<Value> = meta
        .owner_references
        .iter()
        .flatten()
        .map(|o| {
            json!({
                "apiVersion": o.api_version, "kind": o.kind, "name": o.name,
                "controller": o.controller, "blockOwnerDeletion": o.block_owner_deletion,
            })
        })
        .collect();
    let mut view = Map::new();
    if let Some(labels) = &meta.labels {
        view.insert("labels".to_owned(), to_value(labels));
    }
    if !annotations.is_empty() {
        view.insert("annotations".to_owned(), Value::Object(annotations));
    }
    if let Some(finalizers) = &meta.finalizers {
        view.insert("finalizers".to_owned(), to_value(finalizers));
    }
    if !owners.is_empty() {
        view.insert("ownerReferences".to_owned(), Value::Array(owners));
    }
    Value::Object(view)
}

fn job_view(job: DynamicObject) -> Value {
    let mut view = meta_view(&job.metadata);
    // Only what the operator may write; ownerReferences of a job are the user's.
    if let Some(map) = view.as_object_mut() {
        map.remove("ownerReferences");
    }
    view["spec"] = job.data["spec"].clone();
    view["status"] = status_view(&job.data["status"]);
    view
}

/// Conditions by type (type, status, reason, message) plus their order; replica statuses as
/// written; of the timestamps, which are set.
fn status_view(status: &Value) -> Value {
    let mut view = Map::new();
    let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    let mut by_type = Map::new();
    let mut order = Vec::new();
    for c in &conditions {
        let kind = c["type"].as_str().unwrap_or_default().to_owned();
        order.push(kind.clone());
        let key = if by_type.contains_key(&kind) {
            format!("{kind}#{}", order.len())
        } else {
            kind
        };
        by_type.insert(
            key,
            json!({ "status": c["status"], "reason": c["reason"], "message": c["message"] }),
        );
    }
    view.insert("conditions".to_owned(), Value::Object(by_type));
    view.insert("conditionOrder".to_owned(), Value::from(order.join(",")));
    if !status["replicaStatuses"].is_null() {
        view.insert("replicaStatuses".to_owned(), status["replicaStatuses"].clone());
    }
    for time in ["startTime", "completionTime", "lastReconcileTime"] {
        if !status[time].is_null() {
            view.insert(time.to_owned(), Value::from("set"));
        }
    }
    let known = [
        "conditions",
        "replicaStatuses",
        "startTime",
        "completionTime",
        "lastReconcileTime",
    ];
    for (key, value) in status.as_object().into_iter().flatten() {
        if !known.contains(&key.as_str()) {
            view.insert(key.clone(), value.clone());
        }
    }
    Value::Object(view)
}

fn pod_view(pod: Pod) -> Value {
    let mut view = meta_view(&pod.metadata);
    let phase = pod.status.and_then(|s| s.phase).unwrap_or_default();
    view["phase"] = Value::from(phase);
    let mut spec = to_value(pod.spec);
    if let Some(map) = spec.as_object_mut() {
        // The node kwok's scheduler picked is not the operator's doing.
        map.remove("nodeName");
        for list in ["containers", "initContainers"] {
            if let Some(containers) = map.remove(list) {
                map.insert(list.to_owned(), containers_view(containers));
            }
        }
    }
    view["spec"] = spec;
    view
}

/// Containers by name, each with its env as a map by variable name (sorted; a repeated name
/// gets `#<position>` so that duplicates show).
fn containers_view(containers: Value) -> Value {
    let mut by_name = Map::new();
    for mut container in containers.as_array().cloned().unwrap_or_default() {
        let name = container["name"].as_str().unwrap_or_default().to_owned();
        if let Some(env) = container.get("env").and_then(Value::as_array).cloned() {
            let mut vars = Map::new();
            for (i, var) in env.iter().enumerate() {
                let key = var["name"].as_str().unwrap_or_default().to_owned();
                let key = if vars.contains_key(&key) {
                    format!("{key}#{i}")
                } else {
                    key
                };
                let mut value = var.clone();
                if let Some(m) = value.as_object_mut() {
                    m.remove("name");
                }
                vars.insert(key, value);
            }
            container["env"] = Value::Object(vars);
        }
        by_name.insert(name, container);
    }
    Value::Object(by_name)
}

fn service_view(service: Service) -> Value {
    let mut view = meta_view(&service.metadata);
    let mut spec = to_value(service.spec);
    // A headless service's "None" is the operator's; an allocated address is the plane's.
    if spec["clusterIP"].as_str().is_some_and(|ip| ip != "None") {
        spec["clusterIP"] = Value::from("<allocated>");
        spec["clusterIPs"] = json!(["<allocated>"]);
    }
    view["spec"] = spec;
    view
}

/// Events about the job, deduplicated: `"<type> <reason>: <message>" -> true`, and how many
/// were recorded (counting repeats).
async fn events(side: &Side, case: &Case) -> Result<(Value, u64)> {
    let params = ListParams::default().fields(&format!(
        "involvedObject.kind={},involvedObject.name={}",
        case.kind.kind, case.name
    ));
    let events: Vec<Event> = list(side, &params, "events").await?;
    let recorded = events
        .iter()
        .map(|e| u64::try_from(e.count.unwrap_or(1)).unwrap_or(1).max(1))
        .sum();
    let events = keyed(events.into_iter().map(|e| {
        let key = format!(
            "{} {}: {}",
            e.type_.unwrap_or_default(),
            e.reason.unwrap_or_default(),
            e.message.unwrap_or_default()
        );
        (key, Value::Bool(true))
    }));
    Ok((events, recorded))
}

/// The objects of other kinds the job controls: `<Kind>/<name>`.
async fn owned(side: &Side, case: &Case) -> Result<Value> {
    let all = ListParams::default();
    let mut found = Map::new();
    let mut add = |kind: &str, meta: &ObjectMeta, content: Value| {
        if controlled_by(meta, case) {
            let mut view = meta_view(meta);
            view["content"] = content;
            found.insert(format!("{kind}/{}", name(meta)), view);
        }
    };
    for cm in list::<ConfigMap>(side, &all, "configmaps").await? {
        add("ConfigMap", &cm.metadata, to_value(&cm.data));
    }
    for secret in list::<Secret>(side, &all, "secrets").await? {
        // Keys only: the values are generated (SSH keys).
        let keys: Vec<&String> = secret.data.iter().flatten().map(|(k, _)| k).collect();
        add(
            "Secret",
            &secret.metadata,
            json!({ "type": secret.type_, "keys": keys }),
        );
    }
    for job in list::<Job>(side, &all, "jobs").await? {
        add("Job", &job.metadata, to_value(&job.spec));
    }
    for hpa in list::<HorizontalPodAutoscaler>(side, &all, "horizontalpodautoscalers").await? {
        add("HorizontalPodAutoscaler", &hpa.metadata, to_value(&hpa.spec));
    }
    for resource in [volcano_pod_group(), scheduler_plugins_pod_group()] {
        let group = resource.api_version.clone();
        let g = resource.group.clone();
        let api: Api<DynamicObject> = Api::namespaced_with(side.client.clone(), &side.namespace, &resource);
        match api.list(&all).await {
            Ok(list) => {
                for pg in list.items {
                    add(&format!("PodGroup.{g}"), &pg.metadata, pg.data["spec"].clone());
                }
            }
            // The gang scheduler's CRD is not installed: nobody can own one.
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(Error::kube(format!("listing {group} podgroups"))(e)),
        }
    }
    Ok(Value::Object(found))
}

fn pod_group(api_version: &str) -> ApiResource {
    let (group, version) = api_version.split_once('/').unwrap_or((api_version, ""));
    ApiResource {
        group: group.to_owned(),
        version: version.to_owned(),
        api_version: api_version.to_owned(),
        kind: "PodGroup".to_owned(),
        plural: "podgroups".to_owned(),
    }
}

/// Volcano's PodGroup (`scheduling.volcano.sh/v1beta1`).
pub fn volcano_pod_group() -> ApiResource {
    pod_group("scheduling.volcano.sh/v1beta1")
}

/// scheduler-plugins' PodGroup (`scheduling.x-k8s.io/v1alpha1`).
pub fn scheduler_plugins_pod_group() -> ApiResource {
    pod_group("scheduling.x-k8s.io/v1alpha1")
}

/// Namespace names, UIDs and generated volume names replaced in every string and key.
pub fn normalize(value: Value, namespace: &str) -> Value {
    match value {
        Value::String(s) => Value::String(normalize_str(&s, namespace)),
        Value::Array(items) => Value::Array(items.into_iter().map(|v| normalize(v, namespace)).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (normalize_str(&k, namespace), normalize(v, namespace)))
                .collect(),
        ),
        other => other,
    }
}

fn normalize_str(s: &str, namespace: &str) -> String {
    let s = replace_uuids(&s.replace(namespace, "<ns>"));
    // The service-account admission plugin's projected volume has a random suffix.
    match s.strip_prefix("kube-api-access-") {
        Some(suffix) if suffix.len() == 5 && suffix.chars().all(|c| c.is_ascii_alphanumeric()) => {
            "kube-api-access-<random>".to_owned()
        }
        _ => s,
    }
}

/// Every `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` (lowercase hex) replaced by `<uid>`.
fn replace_uuids(s: &str) -> String {
    const GROUPS: [usize; 5] = [8, 4, 4, 4, 12];
    let bytes = s.as_bytes();
    let is_uuid_at = |start: usize| {
        let mut i = start;
        for (n, len) in GROUPS.iter().enumerate() {
            if n > 0 {
                if bytes.get(i) != Some(&b'-') {
                    return false;
                }
                i += 1;
            }
            for _ in 0..*len {
                match bytes.get(i) {
                    Some(b) if b.is_ascii_digit() || (b'a'..=b'f').contains(b) => i += 1,
                    _ => return false,
                }
            }
        }
        true
    };
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < bytes.len() {
        if is_uuid_at(i) {
            out.push_str("<uid>");
            i += 36;
        } else {
            // Safe to step by chars: a UUID is ASCII, so it never starts inside a character.
            let ch = s[i..].chars().next().unwrap_or_default();
            out.push(ch);
            i += ch.len_utf8().max(1);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_uids_and_generated_names_are_normalized() {
        let raw = json!({
            "TF_CONFIG": "{\"cluster\":{\"worker\":[\"j-worker-0.conformance-kfop.svc:2222\"]}}",
            "controller-uid": "0f8fad5b-d9cb-469f-a165-70867728950e",
            "volumes": [{ "name": "kube-api-access-x7k2p" }, { "name": "kube-api-access-mine" }],
            "conformance-kfop/key": 1,
        });
        let normalized = normalize(raw, "conformance-kfop");
        assert_eq!(
            normalized,
            json!({
                "TF_CONFIG": "{\"cluster\":{\"worker\":[\"j-worker-0.<ns>.svc:2222\"]}}",
                "controller-uid": "<uid>",
                "volumes": [{ "name": "kube-api-access-<random>" }, { "name": "kube-api-access-mine" }],
                "<ns>/key": 1,
            })
        );
        assert_eq!(replace_uuids("a-é-b"), "a-é-b");
    }

    #[test]
    fn conditions_are_keyed_by_type_in_order() {
        let status = json!({
            "conditions": [
                { "type": "Created", "status": "True", "reason": "R", "message": "m", "lastTransitionTime": "t" },
                { "type": "Running", "status": "False", "reason": "S", "message": "n" },
            ],
            "startTime": "2026-01-01T00:00:00Z",
            "replicaStatuses": { "Worker": { "active": 1 } },
        });
        let view = status_view(&status);
        assert_eq!(view["conditionOrder"], "Created,Running");
        assert_eq!(view["conditions"]["Running"]["reason"], "S");
        assert!(view["conditions"]["Created"].get("lastTransitionTime").is_none());
        assert_eq!(view["startTime"], "set");
        assert!(view.get("completionTime").is_none());
    }

    #[test]
    fn env_becomes_a_map_and_keeps_duplicates() {
        let containers = json!([{ "name": "pytorch", "env": [
            { "name": "B", "value": "1" }, { "name": "A", "value": "2" }, { "name": "B", "value": "3" },
        ] }]);
        let view = containers_view(containers);
        let env = &view["pytorch"]["env"];
        assert_eq!(env["A"], json!({ "value": "2" }));
        assert_eq!(env["B"], json!({ "value": "1" }));
        assert_eq!(env["B#2"], json!({ "value": "3" }));
    }
}
