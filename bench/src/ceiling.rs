//! The ceiling: the pods and services the operator created, created again by a plain client with
//! the same concurrency (jobs at a time, each job's objects in parallel) and no operator. Its
//! replay variant sends what the operator sends for a job before its pods all exist, so the
//! distance to the ceiling splits into what the request mix costs the server and what the
//! operator itself adds (its watches, its queue, the time between a job's steps).
use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ObjectReference, Pod, Service};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kfop_runtime::{labels, wire};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::error::{Error, Result};
use crate::observe::{JOB_NAME_LABEL, Observed};
use crate::submit;

/// One job's children, ready to create elsewhere.
#[derive(Debug, Clone, Default)]
pub struct Children {
    pub pods: Vec<Pod>,
    pub services: Vec<Service>,
}

/// The operator's pods and services in `namespace`, by job, stripped of server-set fields.
pub async fn capture(client: &Client, namespace: &str) -> Result<BTreeMap<String, Children>> {
    let params = ListParams::default().labels(JOB_NAME_LABEL);
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    let mut jobs: BTreeMap<String, Children> = BTreeMap::new();
    for pod in pods
        .list(&params)
        .await
        .map_err(Error::kube("listing pods"))?
        .items
    {
        if let Some(job) = pod.labels().get(JOB_NAME_LABEL).cloned() {
            jobs.entry(job).or_default().pods.push(fresh_pod(pod));
        }
    }
    for service in services
        .list(&params)
        .await
        .map_err(Error::kube("listing services"))?
        .items
    {
        if let Some(job) = service.labels().get(JOB_NAME_LABEL).cloned() {
            jobs.entry(job).or_default().services.push(fresh_service(service));
        }
    }
    Ok(jobs)
}

/// Only what a creator sets: name, labels, annotations; no owner (it does not exist in the ceiling
/// namespace, and the garbage collector would delete orphans).
fn fresh_meta(meta: ObjectMeta) -> ObjectMeta {
    ObjectMeta {
        name: meta.name,
        labels: meta.labels,
        annotations: meta.annotations,
        ..ObjectMeta::default()
    }
}

pub fn fresh_pod(pod: Pod) -> Pod {
    let mut spec = pod.spec;
    if let Some(spec) = spec.as_mut() {
        spec.node_name = None;
    }
    Pod {
        metadata: fresh_meta(pod.metadata),
        spec,
        status: None,
    }
}

pub fn fresh_service(service: Service) -> Service {
    let mut spec = service.spec;
    if let Some(spec) = spec.as_mut() {
        // Allocated by the API server (headless services keep "None").
        if spec.cluster_ip.as_deref() != Some("None") {
            spec.cluster_ip = None;
            spec.cluster_ips = None;
        }
    }
    Service {
        metadata: fresh_meta(service.metadata),
        spec,
        status: None,
    }
}

/// What the plain client sends for each job.
#[derive(Debug, Clone, Copy)]
pub enum Requests {
    /// Its pods and services: the ceiling.
    Children,
    /// Part or all of what the operator sends for it before its pods all exist; the job's pods
    /// run `run_for`.
    Operator { run_for: Duration, replay: Replay },
}

/// How much of the operator's requests for a job a replay sends, each level adding to the one
/// before. Later status writes (Running, Succeeded) fall mostly after a burst's creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Replay {
    /// The PyTorchJob as the benchmark submits it, then its pods and services owned by it.
    Job,
    /// Also the operator's event per child (`SuccessfulCreate*`, `events.k8s.io/v1`).
    Events,
    /// Also its one status write (`Created`): all the operator sends.
    Full,
}

impl Replay {
    /// The phase's name in the results.
    pub fn phase_name(self) -> &'static str {
        match self {
            Self::Job => "replay: job + children",
            Self::Events => "replay: job + children + events",
            Self::Full => "replay: the operator's requests",
        }
    }
}

/// Sends `requests` for every job in `namespace`, `concurrency` jobs at a time, recording each
/// job's start in `observed` (the pod watch records the rest).
pub async fn run(
    client: &Client,
    namespace: &str,
    jobs: BTreeMap<String, Children>,
    concurrency: usize,
    requests: Requests,
    observed: &Observed,
) -> Result<()> {
    let results: Vec<Result<()>> = futures::stream::iter(jobs)
        .map(|(job, children)| {
            let observed = observed.clone();
            async move {
                let at = observed.now();
                observed.with(|t| t.submitted(&job, at));
                match requests {
                    Requests::Children => create_children(client, namespace, &children, None).await,
                    Requests::Operator { run_for, replay } => {
                        replay_job(client, namespace, &job, &children, run_for, replay).await
                    }
                }
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    results.into_iter().collect()
}

/// Creates one job's pods and services in parallel, owned by `owner` when given.
async fn create_children(
    client: &Client,
    namespace: &str,
    children: &Children,
    owner: Option<&OwnerReference>,
) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    let pod_creates = children.pods.iter().map(|pod| create_owned(&pods, pod, owner));
    let service_creates = children
        .services
        .iter()
        .map(|service| create_owned(&services, service, owner));
    let (p, s) = futures::future::join(
        futures::future::join_all(pod_creates),
        futures::future::join_all(service_creates),
    )
    .await;
    p.into_iter().chain(s).collect()
}

/// Creates `object`, owned by `owner` when given, in the process's wire encoding (as the operator
/// sends it); one that exists already counts as created.
async fn create_owned<K>(api: &Api<K>, object: &K, owner: Option<&OwnerReference>) -> Result<()>
where
    K: wire::Wire + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut object = object.clone();
    object.meta_mut().owner_references = owner.map(|o| vec![o.clone()]);
    create_ignoring_conflict(wire::create(api, &object).await, || {
        format!("creating {} {}", K::kind(&()), object.name_any())
    })
}

/// [`Requests::Operator`] for one job.
async fn replay_job(
    client: &Client,
    namespace: &str,
    name: &str,
    children: &Children,
    run_for: Duration,
    replay: Replay,
) -> Result<()> {
    let resource = submit::pytorch_resource();
    let jobs: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let job = jobs
        .create(&PostParams::default(), &submit::pytorch_job(name, run_for)?)
        .await
        .map_err(Error::kube(format!("creating PyTorchJob {name}")))?;
    let owner = labels::owner_reference(&job, &resource);
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let regarding = ObjectReference {
        api_version: Some(owner.api_version.clone()),
        kind: Some(owner.kind.clone()),
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        uid: Some(owner.uid.clone()),
        ..ObjectReference::default()
    };
    let sent_events = if replay >= Replay::Events {
        child_events(&resource, children, &regarding)
    } else {
        Vec::new()
    };
    let sent_events = sent_events.into_iter().map(|event| {
        let events = events.clone();
        async move {
            wire::create(&events, &event)
                .await
                .map(|_| ())
                .map_err(Error::kube("creating an event"))
        }
    });
    let (created, sent) = futures::future::join(
        create_children(client, namespace, children, Some(&owner)),
        futures::future::join_all(sent_events),
    )
    .await;
    created?;
    sent.into_iter().collect::<Result<()>>()?;
    if replay < Replay::Full {
        return Ok(());
    }
    jobs.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(&json!({ "status": created_status(name, Timestamp::now()) })),
    )
    .await
    .map_err(Error::kube(format!("patching the status of PyTorchJob {name}")))?;
    Ok(())
}

/// The operator's event for each created child of the job `regarding`.
fn child_events(resource: &ApiResource, children: &Children, regarding: &ObjectReference) -> Vec<Event> {
    let job = regarding.name.clone().unwrap_or_default();
    let reference = |kind: &str, name: String| ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some(kind.to_owned()),
        name: Some(name),
        namespace: regarding.namespace.clone(),
        ..ObjectReference::default()
    };
    let pods = children.pods.iter().map(|p| ("Pod", "pod", p.name_any()));
    let services = children
        .services
        .iter()
        .map(|s| ("Service", "service", s.name_any()));
    let controller = format!("{}-controller", resource.kind.to_lowercase());
    pods.chain(services)
        .enumerate()
        .map(|(i, (kind, noun, child))| {
            let reason = format!("SuccessfulCreate{kind}");
            Event {
                metadata: ObjectMeta {
                    name: Some(format!("{job}.{i:x}")),
                    namespace: regarding.namespace.clone(),
                    ..ObjectMeta::default()
                },
                action: Some(reason.clone()),
                reason: Some(reason),
                note: Some(format!("Created {noun}: {child}")),
                type_: Some("Normal".to_owned()),
                event_time: Some(MicroTime(Timestamp::now())),
                regarding: Some(regarding.clone()),
                related: Some(reference(kind, child)),
                reporting_controller: Some(controller.clone()),
                reporting_instance: Some(controller.clone()),
                ..Event::default()
            }
        })
        .collect()
}

/// The status the operator writes once a job's children are created.
fn created_status(name: &str, now: Timestamp) -> serde_json::Value {
    let at = Time(now);
    let replicas = |role: &str| {
        let mut selector = labels::job_labels("pytorchjob-controller", name);
        selector.insert(labels::REPLICA_TYPE.to_owned(), role.to_owned());
        json!({ "active": 0, "selector": labels::selector_string(&selector) })
    };
    json!({
        "conditions": [{
            "type": "Created",
            "status": "True",
            "reason": "PyTorchJobCreated",
            "message": format!("PyTorchJob {name} is created."),
            "lastUpdateTime": at,
            "lastTransitionTime": at,
        }],
        "replicaStatuses": { "Master": replicas("master"), "Worker": replicas("worker") },
        "startTime": at,
    })
}

fn create_ignoring_conflict<T>(result: kube::Result<T>, context: impl FnOnce() -> String) -> Result<()> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(e) => Err(Error::kube(context())(e)),
    }
}

/// How long to wait for the operator's services to catch up with its pods before capturing.
pub const CAPTURE_SETTLE: Duration = Duration::from_secs(2);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn server_fields_are_dropped() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {
                "name": "bench-00001-master-0", "namespace": "op", "uid": "u", "resourceVersion": "7",
                "labels": { JOB_NAME_LABEL: "bench-00001" },
                "ownerReferences": [{ "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "bench-00001", "uid": "j" }],
            },
            "spec": { "nodeName": "kwok-node-1", "containers": [{ "name": "pytorch", "image": "x" }] },
            "status": { "phase": "Running" },
        }))
        .unwrap();
        let pod = fresh_pod(pod);
        assert_eq!(pod.metadata.name.as_deref(), Some("bench-00001-master-0"));
        assert!(pod.metadata.owner_references.is_none() && pod.metadata.namespace.is_none());
        assert!(pod.metadata.resource_version.is_none() && pod.status.is_none());
        assert_eq!(pod.spec.unwrap().node_name, None);

        let service: Service = serde_json::from_value(json!({
            "metadata": { "name": "s", "uid": "u" },
            "spec": { "clusterIP": "None", "clusterIPs": ["None"], "ports": [{ "port": 23456 }] },
        }))
        .unwrap();
        assert_eq!(
            fresh_service(service).spec.unwrap().cluster_ip.as_deref(),
            Some("None")
        );
    }

    #[test]
    fn a_replayed_job_sends_the_operators_events_and_status() {
        let pod = |name: &str| Pod {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        };
        let children = Children {
            pods: vec![pod("j-master-0"), pod("j-worker-0")],
            services: vec![Service {
                metadata: ObjectMeta {
                    name: Some("j-master-0".to_owned()),
                    ..ObjectMeta::default()
                },
                ..Service::default()
            }],
        };
        let regarding = ObjectReference {
            name: Some("j".to_owned()),
            namespace: Some("ns".to_owned()),
            ..ObjectReference::default()
        };
        let events = child_events(&submit::pytorch_resource(), &children, &regarding);
        let reasons: Vec<_> = events.iter().filter_map(|e| e.reason.as_deref()).collect();
        assert_eq!(
            reasons,
            [
                "SuccessfulCreatePod",
                "SuccessfulCreatePod",
                "SuccessfulCreateService"
            ]
        );
        let names: std::collections::BTreeSet<_> =
            events.iter().filter_map(|e| e.metadata.name.clone()).collect();
        assert_eq!(names.len(), 3, "each event has its own name");
        assert_eq!(events[2].note.as_deref(), Some("Created service: j-master-0"));
        assert_eq!(
            events[0].reporting_controller.as_deref(),
            Some("pytorchjob-controller")
        );
        assert_eq!(
            events[1].related.as_ref().and_then(|r| r.name.as_deref()),
            Some("j-worker-0")
        );

        let status = created_status("j", Timestamp::UNIX_EPOCH);
        assert_eq!(status["conditions"][0]["type"], "Created");
        assert_eq!(status["conditions"][0]["message"], "PyTorchJob j is created.");
        assert!(
            status["replicaStatuses"]["Worker"]["selector"]
                .as_str()
                .is_some_and(|s| s.ends_with("replica-type=worker"))
        );
    }
}
