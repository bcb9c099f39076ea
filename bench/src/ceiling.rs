//! The ceiling: the pods and services the operator created, created again by a plain client with
//! the same concurrency (jobs at a time, each job's objects in parallel) and no operator.
use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};

use crate::error::{Error, Result};
use crate::observe::{JOB_NAME_LABEL, Observed};

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

/// Creates every job's children in `namespace`, `concurrency` jobs at a time, recording each
/// job's start in `observed` (the pod watch records the rest).
pub async fn run(
    client: &Client,
    namespace: &str,
    jobs: BTreeMap<String, Children>,
    concurrency: usize,
    observed: &Observed,
) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    let results: Vec<Result<()>> = futures::stream::iter(jobs)
        .map(|(job, children)| {
            let (pods, services, observed) = (pods.clone(), services.clone(), observed.clone());
            async move {
                let at = observed.now();
                observed.with(|t| t.submitted(&job, at));
                let pod_creates = children.pods.iter().map(|pod| {
                    let pods = pods.clone();
                    async move {
                        create_ignoring_conflict(pods.create(&PostParams::default(), pod).await, || {
                            format!("creating pod {}", pod.name_any())
                        })
                    }
                });
                let service_creates = children.services.iter().map(|service| {
                    let services = services.clone();
                    async move {
                        create_ignoring_conflict(
                            services.create(&PostParams::default(), service).await,
                            || format!("creating service {}", service.name_any()),
                        )
                    }
                });
                let (p, s) = futures::future::join(
                    futures::future::join_all(pod_creates),
                    futures::future::join_all(service_creates),
                )
                .await;
                p.into_iter().chain(s).collect::<Result<()>>()
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    results.into_iter().collect()
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
}
