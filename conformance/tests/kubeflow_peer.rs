#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Kubeflow training-operator v1.8.1, built from its Go module and run out of cluster, works on
//! the local plane: its validating webhook answers over loopback, and it runs a PyTorchJob with
//! its own pod and service names to Succeeded.
//!
//! The plane is private: Kubeflow's CRDs have the names of kfop's, which the shared plane has.
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Service};
use kfop_testenv::{Assets, ControlPlane, Peer, PeerBuild, PeerOptions, PlaneOptions, pods, wait};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};

const NAMESPACE: &str = "kf";

fn pytorch_jobs(client: kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kubeflow.org", "v1", "PyTorchJob"),
        "pytorchjobs",
    );
    Api::namespaced_with(client, NAMESPACE, &ar)
}

/// 1 Master + 1 Worker whose pods kwok completes with exit code 0 after 2 s.
fn pytorch_job(name: &str, container: &str) -> DynamicObject {
    let (key, value) = pods::complete_after(Duration::from_secs(2));
    let replica = json!({
        "replicas": 1,
        "restartPolicy": "OnFailure",
        "template": {
            "metadata": { "annotations": { key: value } },
            "spec": { "containers": [{ "name": container, "image": "busybox" }] },
        },
    });
    serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": { "name": name, "namespace": NAMESPACE },
        "spec": { "pytorchReplicaSpecs": { "Master": replica, "Worker": replica } },
    }))
    .unwrap()
}

fn condition_true(job: &DynamicObject, kind: &str) -> bool {
    job.data["status"]["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == kind && c["status"] == "True"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubeflow_v1_8_1_runs_a_pytorchjob_to_success() {
    let started = Instant::now();
    // Both builds are no-ops on a warm cache; cold, they take minutes (and need Go).
    tokio::task::spawn_blocking(|| {
        Assets::locate_or_build().unwrap();
        PeerBuild::locate_or_build(kfop_testenv::peer::TRAINING_OPERATOR).unwrap();
    })
    .await
    .unwrap();
    let built = started.elapsed();

    let plane = ControlPlane::start(PlaneOptions::default()).await.unwrap();
    let plane_up = started.elapsed();
    let peer = Peer::start(plane.kubeconfig(), NAMESPACE, PeerOptions::default())
        .await
        .unwrap();
    let peer_up = started.elapsed();
    let client = plane.client().await.unwrap();
    let jobs = pytorch_jobs(client.clone());

    // Admission is Kubeflow's: its webhook, called over loopback, wants a container "pytorch".
    let refused = jobs
        .create(&PostParams::default(), &pytorch_job("unnamed", "main"))
        .await
        .expect_err("Kubeflow's webhook should refuse a job without a `pytorch` container");
    let message = refused.to_string();
    assert!(
        message.contains("validator.pytorchjob.training-operator.kubeflow.org")
            && message.contains("must have at least one container with name pytorch"),
        "{message}"
    );

    let name = "mnist";
    jobs.create(&PostParams::default(), &pytorch_job(name, "pytorch"))
        .await
        .unwrap();

    // Kubeflow's names: one pod and one headless service per replica, `<job>-<type>-<index>`.
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let services: Api<Service> = Api::namespaced(client.clone(), NAMESPACE);
    for (replica, kind) in [("master-0", "master"), ("worker-0", "worker")] {
        let object = format!("{name}-{replica}");
        let pod = wait::until(&format!("pod {object}"), wait::default_timeout(), || async {
            Ok(pods_api.get_opt(&object).await.unwrap())
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\npeer log:\n{}", peer.log_tail(40)));
        let labels = pod.metadata.labels.unwrap_or_default();
        assert_eq!(labels["training.kubeflow.org/job-name"], name, "{labels:?}");
        assert_eq!(labels["training.kubeflow.org/replica-type"], kind, "{labels:?}");
        assert_eq!(labels["training.kubeflow.org/replica-index"], "0", "{labels:?}");
        let service = wait::until(&format!("service {object}"), wait::default_timeout(), || async {
            Ok(services.get_opt(&object).await.unwrap())
        })
        .await
        .unwrap();
        assert_eq!(
            service.spec.unwrap().cluster_ip.as_deref(),
            Some("None"),
            "headless"
        );
    }

    let job = wait::until(
        &format!("PyTorchJob {name} Succeeded"),
        wait::default_timeout(),
        || async {
            let job = jobs.get(name).await.unwrap();
            Ok(condition_true(&job, "Succeeded").then_some(job))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\npeer log:\n{}", peer.log_tail(40)));
    // A PyTorchJob succeeds with its master; the worker, started later, may still run then.
    let statuses = &job.data["status"]["replicaStatuses"];
    assert_eq!(statuses["Master"]["succeeded"], Value::from(1), "{statuses}");
    let worker = |field: &str| statuses["Worker"][field].as_u64().unwrap_or(0);
    assert_eq!(worker("succeeded") + worker("active"), 1, "{statuses}");
    assert_eq!(worker("failed"), 0, "{statuses}");
    let done = started.elapsed();
    eprintln!(
        "timings: builds {:.1}s, plane {:.1}s, peer {:.1}s, job {:.1}s, total {:.1}s",
        built.as_secs_f64(),
        (plane_up - built).as_secs_f64(),
        (peer_up - plane_up).as_secs_f64(),
        (done - peer_up).as_secs_f64(),
        done.as_secs_f64()
    );
    drop(peer);
    drop(plane);
}
