#![allow(clippy::unwrap_used)]
//! The same manifest compiled by `kfop gen` (this crate) and loaded at run time
//! (`kfop_runtime::dynamic`) plans the same: the pods, services, status and events of one job
//! through creation, running and success are equal.
use std::path::Path;
use std::sync::Arc;

use jax_operator::{JAXJob, Jax};
use kfop_runtime::TrainingJob;
use kfop_runtime::dynamic::{NoCode, RuntimeJob};
use kfop_runtime::framework::{Loaded, Observed, observed_service};
use kfop_runtime::k8s_openapi::api::core::v1::{Pod, Service};
use kfop_runtime::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kfop_runtime::k8s_openapi::jiff::Timestamp;
use kfop_runtime::plan::{Plan, plan};
use kfop_runtime::serde_json::{self, Value, json};

fn job_json(status: Option<&Value>) -> Value {
    let mut job = json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "JAXJob",
        "metadata": {"name": "same", "namespace": "ns", "uid": "job-uid"},
        "spec": {"jaxReplicaSpecs": {"Worker": {"replicas": 3, "template": {"spec": {"containers": [
            {"name": "jax", "image": "busybox"}
        ]}}}}},
    });
    if let Some(status) = status {
        job["status"] = status.clone();
    }
    job
}

fn runtime_framework() -> Loaded<NoCode> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("kfop.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let model = kfop_runtime::manifest::model::parse(&text, &path).unwrap();
    kfop_runtime::dynamic::load(&model).unwrap()
}

/// What a plan does, as JSON, for comparison.
fn summary(plan: &Plan) -> Value {
    json!({
        "pods": plan.create_pods,
        "services": plan.create_services,
        "deletePods": plan.delete_pods.iter().map(|c| format!("{c:?}")).collect::<Vec<_>>(),
        "status": plan.status,
        "events": plan.events.iter().map(|e| format!("{e:?}")).collect::<Vec<_>>(),
    })
}

fn plans(status: Option<&Value>, observed: &Observed, now: &Time) -> (Plan, Plan) {
    let compiled: JAXJob = serde_json::from_value(job_json(status)).unwrap();
    let loaded: RuntimeJob = serde_json::from_value(job_json(status)).unwrap();
    let a = plan(&jax_operator::framework(Jax).unwrap(), &compiled, observed, now).unwrap();
    let b = plan(&runtime_framework(), &loaded, observed, now).unwrap();
    (a, b)
}

fn observed(pods: &[Pod], services: &[Service], phase: &str) -> Observed {
    let pods = pods
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, mut pod)| {
            pod.metadata.uid = Some(format!("pod-{i}"));
            pod.status = Some(serde_json::from_value(json!({"phase": phase})).unwrap());
            Arc::new(pod.into())
        })
        .collect();
    Observed {
        pods,
        services: services
            .iter()
            .cloned()
            .map(|s| Arc::new(observed_service(s)))
            .collect(),
        ..Observed::default()
    }
}

#[test]
fn compiled_and_loaded_frameworks_plan_one_job_alike() {
    let now = Time(Timestamp::from_second(1_700_000_000).unwrap());
    assert_eq!(JAXJob::framework_info(), runtime_framework().info());

    let (created, loaded) = plans(None, &Observed::default(), &now);
    assert_eq!(summary(&created), summary(&loaded));
    assert_eq!(created.create_pods.len(), 3);
    let status = serde_json::to_value(created.status.as_ref().unwrap()).unwrap();

    let running = observed(&created.create_pods, &created.create_services, "Running");
    let (compiled, loaded) = plans(Some(&status), &running, &now);
    assert_eq!(summary(&compiled), summary(&loaded));
    let status = serde_json::to_value(compiled.status.as_ref().unwrap()).unwrap();
    assert_eq!(
        status["conditions"].as_array().unwrap().last().unwrap()["type"],
        "Running"
    );

    let succeeded = observed(&created.create_pods, &created.create_services, "Succeeded");
    let (compiled, loaded) = plans(Some(&status), &succeeded, &now);
    assert_eq!(summary(&compiled), summary(&loaded));
    let status = serde_json::to_value(compiled.status.as_ref().unwrap()).unwrap();
    assert_eq!(
        status["conditions"].as_array().unwrap().last().unwrap()["type"],
        "Succeeded"
    );
}
