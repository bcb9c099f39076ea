#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Kubeflow training-operator, built from its Go module and run out of cluster, works on the
//! local plane: its validating webhook answers over loopback, and it runs a job with its own pod
//! and service names to Succeeded. v1.8.1 runs a PyTorchJob; v1.9.0, the first with JAXJob and
//! whose cert rotator and webhooks are set up the same way, a JAXJob. mpi-operator v0.6.0, with
//! no webhooks, runs its own `examples/v2beta1/pi/pi.yaml` (an MPIJob `kubeflow.org/v2beta1`)
//! to Succeeded: workers as pods, the launcher as a batch Job the plane's Job controller runs.
//!
//! The plane is private: Kubeflow's CRDs have the names of kfop's, which the shared plane has.
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Service};
use kfop_testenv::{Assets, ControlPlane, Peer, PeerBuild, PeerOptions, PlaneOptions, pods, wait};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};

const NAMESPACE: &str = "kf";

/// A kind as the test drives it.
struct Kind {
    kind: &'static str,
    plural: &'static str,
    specs: &'static str,
    roles: &'static [&'static str],
}

const PYTORCH: Kind = Kind {
    kind: "PyTorchJob",
    plural: "pytorchjobs",
    specs: "pytorchReplicaSpecs",
    roles: &["Master", "Worker"],
};

const JAX: Kind = Kind {
    kind: "JAXJob",
    plural: "jaxjobs",
    specs: "jaxReplicaSpecs",
    roles: &["Worker"],
};

impl Kind {
    fn jobs(&self, client: kube::Client) -> Api<DynamicObject> {
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("kubeflow.org", "v1", self.kind),
            self.plural,
        );
        Api::namespaced_with(client, NAMESPACE, &ar)
    }

    /// One replica of every role, whose pods kwok completes with exit code 0 after 2 s.
    fn job(&self, name: &str, container: &str) -> DynamicObject {
        let (key, value) = pods::complete_after(Duration::from_secs(2));
        let replica = json!({
            "replicas": 1,
            "restartPolicy": "OnFailure",
            "template": {
                "metadata": { "annotations": { key: value } },
                "spec": { "containers": [{ "name": container, "image": "busybox" }] },
            },
        });
        let specs: serde_json::Map<String, Value> = self
            .roles
            .iter()
            .map(|role| ((*role).to_owned(), replica.clone()))
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "kubeflow.org/v1",
            "kind": self.kind,
            "metadata": { "name": name, "namespace": NAMESPACE },
            "spec": { self.specs: specs },
        }))
        .unwrap()
    }
}

fn condition_true(job: &DynamicObject, kind: &str) -> bool {
    job.data["status"]["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == kind && c["status"] == "True"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubeflow_v1_8_1_runs_a_pytorchjob_to_success() {
    runs_to_success(kfop_testenv::peer::TRAINING_OPERATOR, &PYTORCH, "pytorch").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubeflow_v1_9_0_runs_a_jaxjob_to_success() {
    runs_to_success(kfop_testenv::peer::TRAINING_OPERATOR_V1_9_0, &JAX, "jax").await;
}

/// `peer` (with its own CRDs and webhooks, every scheme enabled) refuses a `kind` job without
/// the framework's `container`, and runs one with it: one pod and one headless service per
/// replica, the first role deciding success.
async fn runs_to_success(peer_folder: &'static str, kind: &Kind, container: &str) {
    let started = Instant::now();
    // Both builds are no-ops on a warm cache; cold, they take minutes (and need Go).
    tokio::task::spawn_blocking(move || {
        Assets::locate_or_build().unwrap();
        PeerBuild::locate_or_build(peer_folder).unwrap();
    })
    .await
    .unwrap();
    let built = started.elapsed();

    let plane = ControlPlane::start(PlaneOptions::default()).await.unwrap();
    let plane_up = started.elapsed();
    let options = PeerOptions {
        peer: peer_folder.to_owned(),
        ..PeerOptions::default()
    };
    let peer = Peer::start(plane.kubeconfig(), NAMESPACE, options).await.unwrap();
    let peer_up = started.elapsed();
    let client = plane.client().await.unwrap();
    let jobs = kind.jobs(client.clone());

    // Admission is Kubeflow's: its webhook, called over loopback, wants the framework's container.
    // The API server learns of a new webhook configuration through its own watch and admits
    // writes without it until then: dry runs (the webhook has no side effects) until one is
    // refused.
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let refused = wait::until(
        "Kubeflow's webhook refusing a job without the framework's container",
        wait::default_timeout(),
        || async { Ok(jobs.create(&dry_run, &kind.job("unnamed", "main")).await.err()) },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\npeer log:\n{}", peer.log_tail(40)));
    let message = refused.to_string();
    let webhook = format!(
        "validator.{}.training-operator.kubeflow.org",
        kind.kind.to_ascii_lowercase()
    );
    assert!(
        message.contains(&webhook)
            && message.contains(&format!("must have at least one container with name {container}")),
        "{message}"
    );

    let name = "mnist";
    jobs.create(&PostParams::default(), &kind.job(name, container))
        .await
        .unwrap();

    // Kubeflow's names: one pod and one headless service per replica, `<job>-<type>-<index>`.
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let services: Api<Service> = Api::namespaced(client.clone(), NAMESPACE);
    for role in kind.roles {
        let replica_type = role.to_ascii_lowercase();
        let object = format!("{name}-{replica_type}-0");
        let pod = wait::until(&format!("pod {object}"), wait::default_timeout(), || async {
            Ok(pods_api.get_opt(&object).await.unwrap())
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\npeer log:\n{}", peer.log_tail(40)));
        let labels = pod.metadata.labels.unwrap_or_default();
        assert_eq!(labels["training.kubeflow.org/job-name"], name, "{labels:?}");
        assert_eq!(
            labels["training.kubeflow.org/replica-type"], replica_type,
            "{labels:?}"
        );
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
        &format!("{} {name} Succeeded", kind.kind),
        wait::default_timeout(),
        || async {
            let job = jobs.get(name).await.unwrap();
            Ok(condition_true(&job, "Succeeded").then_some(job))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\npeer log:\n{}", peer.log_tail(40)));
    // The first role decides (a PyTorchJob's master); the others, started later, may still run.
    let statuses = &job.data["status"]["replicaStatuses"];
    let count = |role: &str, field: &str| statuses[role][field].as_u64().unwrap_or(0);
    assert_eq!(count(kind.roles[0], "succeeded"), 1, "{statuses}");
    for role in &kind.roles[1..] {
        assert_eq!(count(role, "succeeded") + count(role, "active"), 1, "{statuses}");
        assert_eq!(count(role, "failed"), 0, "{statuses}");
    }
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

/// mpi-operator v0.6.0 (its own CRD, no webhooks) runs its `pi` example to Succeeded: a headless
/// service and a hostfile ConfigMap, `<job>-worker-<i>` pods, and a `<job>-launcher` batch Job
/// whose pod kwok completes; the Job's completion is the MPIJob's success.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mpi_operator_v0_6_0_runs_its_pi_example_to_success() {
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::core::v1::ConfigMap;

    let started = Instant::now();
    let peer_folder = kfop_testenv::peer::MPI_OPERATOR_V0_6_0;
    let example = tokio::task::spawn_blocking(move || {
        Assets::locate_or_build().unwrap();
        let build = PeerBuild::locate_or_build(peer_folder).unwrap();
        let file = build.module_source().unwrap().join("examples/v2beta1/pi/pi.yaml");
        std::fs::read_to_string(file).unwrap()
    })
    .await
    .unwrap();
    let built = started.elapsed();
    let mut job: Value = serde_saphyr::from_str(&example).unwrap();
    assert_eq!(job["apiVersion"], "kubeflow.org/v2beta1");
    let name = job["metadata"]["name"].as_str().unwrap().to_owned();
    job["metadata"]["namespace"] = json!(NAMESPACE);
    // Only the launcher ends: MPI workers serve sshd until the launcher's mpirun is done.
    let (key, value) = pods::complete_after(Duration::from_secs(2));
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["metadata"] =
        json!({ "annotations": { key: value } });

    let plane = ControlPlane::start(PlaneOptions::default()).await.unwrap();
    let plane_up = started.elapsed();
    let options = PeerOptions {
        peer: peer_folder.to_owned(),
        ..PeerOptions::default()
    };
    let peer = Peer::start(plane.kubeconfig(), NAMESPACE, options).await.unwrap();
    let peer_up = started.elapsed();
    let client = plane.client().await.unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kubeflow.org", "v2beta1", "MPIJob"),
        "mpijobs",
    );
    let jobs: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &ar);
    jobs.create(&PostParams::default(), &serde_json::from_value(job).unwrap())
        .await
        .unwrap();

    let pods_api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    for i in 0..2 {
        let object = format!("{name}-worker-{i}");
        let pod = wait::until(&format!("pod {object}"), wait::default_timeout(), || async {
            Ok(pods_api.get_opt(&object).await.unwrap())
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\npeer log:\n{}", peer.log_tail(40)));
        let labels = pod.metadata.labels.unwrap_or_default();
        assert_eq!(labels["training.kubeflow.org/job-name"], name, "{labels:?}");
        assert_eq!(labels["training.kubeflow.org/job-role"], "worker", "{labels:?}");
        assert_eq!(
            labels["training.kubeflow.org/replica-index"],
            i.to_string(),
            "{labels:?}"
        );
    }
    let services: Api<Service> = Api::namespaced(client.clone(), NAMESPACE);
    let service = wait::until(&format!("service {name}"), wait::default_timeout(), || async {
        Ok(services.get_opt(&name).await.unwrap())
    })
    .await
    .unwrap();
    assert_eq!(
        service.spec.unwrap().cluster_ip.as_deref(),
        Some("None"),
        "headless"
    );
    let config: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let hostfile = config.get(&format!("{name}-config")).await.unwrap();
    assert!(
        hostfile.data.unwrap_or_default()["hostfile"].contains(&format!("{name}-worker-0.{name}")),
        "hostfile names the workers by the headless service"
    );
    let launchers: Api<Job> = Api::namespaced(client.clone(), NAMESPACE);
    wait::until(
        &format!("Job {name}-launcher"),
        wait::default_timeout(),
        || async { Ok(launchers.get_opt(&format!("{name}-launcher")).await.unwrap()) },
    )
    .await
    .unwrap();

    let job = wait::until(
        &format!("MPIJob {name} Succeeded"),
        wait::default_timeout(),
        || async {
            let job = jobs.get(&name).await.unwrap();
            Ok(condition_true(&job, "Succeeded").then_some(job))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\npeer log:\n{}", peer.log_tail(40)));
    let statuses = &job.data["status"]["replicaStatuses"];
    assert_eq!(statuses["Launcher"]["succeeded"].as_u64(), Some(1), "{statuses}");
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
