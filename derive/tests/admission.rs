#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The generated CRDs on a real kube-apiserver: invalid jobs are rejected at admission with a
//! message naming the field, and Kubeflow's example jobs are accepted unchanged.
mod kinds;

use kfop_runtime::TrainingJob;
use kfop_runtime::kube::Resource;
use kfop_runtime::kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kfop_runtime::kube::{Client, CustomResourceExt};
use kfop_testenv::admission::{self, Case, Verdict};
use kfop_testenv::{TestEnv, TestNamespace};
use kinds::pytorchjob::PyTorchJob;
use kinds::tfjob::TFJob;
use serde_json::{Value, json};

async fn setup(prefix: &str) -> TestNamespace {
    let env = TestEnv::shared().unwrap();
    env.install_crds([PyTorchJob::crd(), TFJob::crd()]).await.unwrap();
    env.namespace(prefix).await.unwrap()
}

/// An untyped API for `K`, so that inputs the typed structs could not even hold reach the server.
fn dynamic<K: Resource<DynamicType = ()>>(client: Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client, ns, &ApiResource::erase::<K>(&()))
}

fn object<K: Resource<DynamicType = ()>>(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "metadata": { "name": name },
        "spec": spec,
    }))
    .unwrap()
}

/// A replica spec whose pods run `container`.
fn replica_of(replicas: i64, container: Value) -> Value {
    json!({
        "replicas": replicas,
        "restartPolicy": "OnFailure",
        "template": { "spec": { "containers": [container] } },
    })
}

/// A replica spec with one busybox container named `name`.
fn replica(replicas: i64, name: &str) -> Value {
    replica_of(replicas, json!({ "name": name, "image": "busybox" }))
}

fn pytorch_spec(specs: Value) -> Value {
    json!({ "pytorchReplicaSpecs": specs })
}

fn master_worker() -> Value {
    pytorch_spec(json!({ "Master": replica(1, "pytorch"), "Worker": replica(2, "pytorch") }))
}

fn with_run_policy(run_policy: Value) -> Value {
    let mut spec = master_worker();
    spec["runPolicy"] = run_policy;
    spec
}

fn cases() -> Vec<Case> {
    let pytorch = ApiResource::erase::<PyTorchJob>(&());
    let tf = ApiResource::erase::<TFJob>(&());
    let worker = |replicas, restart: &str| {
        let mut r = replica(replicas, "pytorch");
        r["restartPolicy"] = json!(restart);
        r
    };
    let without_image = replica_of(1, json!({ "name": "pytorch" }));
    let bad = |what: &str, resource: &ApiResource, spec: Value, expect: &[&str]| {
        Case::new(what, resource, "bad", spec, Verdict::rejected(expect))
    };
    vec![
        bad(
            "unknown replica type Launcher",
            &pytorch,
            pytorch_spec(json!({ "Master": replica(1, "pytorch"), "Launcher": replica(1, "pytorch") })),
            &[
                "spec.pytorchReplicaSpecs",
                "has an unknown replica type: use only Master, Worker",
            ],
        ),
        bad(
            "Worker and worker both",
            &pytorch,
            pytorch_spec(json!({ "Worker": replica(1, "pytorch"), "worker": replica(1, "pytorch") })),
            &["spec.pytorchReplicaSpecs", "twice in different letter case"],
        ),
        bad(
            "no replica types",
            &pytorch,
            pytorch_spec(json!({})),
            &["spec.pytorchReplicaSpecs must not be empty"],
        ),
        bad(
            "replica specs missing",
            &pytorch,
            json!({ "runPolicy": {} }),
            &["spec.pytorchReplicaSpecs: Required value"],
        ),
        bad(
            "Master replicas 2 (max 1)",
            &pytorch,
            pytorch_spec(json!({ "Master": replica(2, "pytorch") })),
            &["spec.pytorchReplicaSpecs.Master.replicas must be 1"],
        ),
        bad(
            "master replicas 0 (min 1, lower-case key)",
            &pytorch,
            pytorch_spec(json!({ "master": replica(0, "pytorch") })),
            &["spec.pytorchReplicaSpecs.Master.replicas must be 1"],
        ),
        bad(
            "Worker replicas -1",
            &pytorch,
            pytorch_spec(json!({ "Worker": replica(-1, "pytorch") })),
            &[
                "spec.pytorchReplicaSpecs[Worker].replicas",
                "must not be negative",
            ],
        ),
        bad(
            "restartPolicy Sometimes",
            &pytorch,
            pytorch_spec(json!({ "Worker": worker(1, "Sometimes") })),
            &[
                "spec.pytorchReplicaSpecs.Worker.restartPolicy",
                "Unsupported value: \"Sometimes\"",
            ],
        ),
        bad(
            "cleanPodPolicy Some",
            &pytorch,
            with_run_policy(json!({ "cleanPodPolicy": "Some" })),
            &["spec.runPolicy.cleanPodPolicy", "Unsupported value: \"Some\""],
        ),
        bad(
            "backoffLimit -1",
            &pytorch,
            with_run_policy(json!({ "backoffLimit": -1 })),
            &["spec.runPolicy.backoffLimit must not be negative"],
        ),
        bad(
            "activeDeadlineSeconds -5",
            &pytorch,
            with_run_policy(json!({ "activeDeadlineSeconds": -5 })),
            &["spec.runPolicy.activeDeadlineSeconds must not be negative"],
        ),
        bad(
            "ttlSecondsAfterFinished -1",
            &pytorch,
            with_run_policy(json!({ "ttlSecondsAfterFinished": -1 })),
            &["spec.runPolicy.ttlSecondsAfterFinished must not be negative"],
        ),
        bad(
            "no containers",
            &pytorch,
            pytorch_spec(json!({ "Worker": { "template": { "spec": { "containers": [] } } } })),
            &[
                "spec.pytorchReplicaSpecs.Worker.template.spec.containers",
                "at least 1 items",
            ],
        ),
        bad(
            "container without image",
            &pytorch,
            pytorch_spec(json!({ "Worker": without_image })),
            &["spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].image: Required value"],
        ),
        Case::new(
            "name 1job",
            &pytorch,
            "1job",
            master_worker(),
            Verdict::rejected(&["metadata.name must be a DNS-1035 label"]),
        ),
        bad(
            "TFJob with Chief and Master",
            &tf,
            json!({ "tfReplicaSpecs": {
                "Chief": replica(1, "tensorflow"),
                "Master": replica(1, "tensorflow"),
            } }),
            &["spec.tfReplicaSpecs may have only one of Chief, Master"],
        ),
        bad(
            "TFJob Evaluator replicas 2 (max 1)",
            &tf,
            json!({ "tfReplicaSpecs": {
                "Worker": replica(2, "tensorflow"),
                "Evaluator": replica(2, "tensorflow"),
            } }),
            &["spec.tfReplicaSpecs.Evaluator.replicas must be at most 1"],
        ),
    ]
}

#[tokio::test]
async fn invalid_jobs_are_rejected_at_admission() {
    let ns = setup("admission").await;
    let report = admission::run(ns.client(), ns.name(), &cases()).await;
    println!("{}", report.table);
    assert!(report.failures.is_empty(), "{}", report.failures.join("\n"));
}

#[tokio::test]
async fn scheduling_queue_is_immutable() {
    let ns = setup("queue").await;
    let api = dynamic::<PyTorchJob>(ns.client(), ns.name());
    let spec = with_run_policy(json!({ "schedulingPolicy": { "queue": "research" } }));
    api.create(&PostParams::default(), &object::<PyTorchJob>("queued", spec))
        .await
        .unwrap();
    // Other run-policy fields may change while the queue stays.
    let params = PatchParams::default();
    api.patch(
        "queued",
        &params,
        &Patch::Merge(json!({ "spec": { "runPolicy": { "suspend": true } } })),
    )
    .await
    .unwrap();
    let moved = json!({ "spec": { "runPolicy": { "schedulingPolicy": { "queue": "prod" } } } });
    match api.patch("queued", &params, &Patch::Merge(moved)).await {
        Err(kfop_runtime::kube::Error::Api(status)) => {
            println!("queue change -> {}", status.message);
            assert_eq!(status.code, 422);
            assert!(
                status.message.contains(
                    "spec.runPolicy.schedulingPolicy.queue: Invalid value: \"prod\": spec.runPolicy.schedulingPolicy.queue is immutable"
                ),
                "{}",
                status.message
            );
        }
        other => panic!("queue change not rejected: {other:?}"),
    }
}

fn container(name: &str, image: &str, command: &[&str]) -> Value {
    json!({ "name": name, "image": image, "imagePullPolicy": "Always", "command": command })
}

/// A replica of Kubeflow's PyTorch mnist example.
fn mnist_replica(replicas: i64) -> Value {
    let command = ["python3", "/opt/pytorch-mnist/mnist.py", "--epochs=1"];
    let image = "docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727";
    replica_of(replicas, container("pytorch", image, &command))
}

/// Creates `spec` and reads it back: the server keeps it as written, adding only the schema's
/// `runPolicy: {}` default.
async fn accepted<K: Resource<DynamicType = ()>>(ns: &TestNamespace, name: &str, spec: Value) {
    let api = dynamic::<K>(ns.client(), ns.name());
    api.create(&PostParams::default(), &object::<K>(name, spec.clone()))
        .await
        .unwrap_or_else(|e| panic!("{name} rejected: {e}"));
    let stored = api.get(name).await.unwrap().data["spec"].clone();
    let mut expected = spec;
    expected
        .as_object_mut()
        .unwrap()
        .entry("runPolicy")
        .or_insert(json!({}));
    assert_eq!(stored, expected, "{name} changed on the way in");
}

#[tokio::test]
async fn kubeflow_examples_are_accepted_unchanged() {
    let ns = setup("examples").await;
    let mnist = |master: &str, worker: &str, workers| json!({ "pytorchReplicaSpecs": { master: mnist_replica(1), worker: mnist_replica(workers) } });
    accepted::<PyTorchJob>(&ns, "pytorch-simple", mnist("Master", "Worker", 1)).await;
    accepted::<PyTorchJob>(&ns, "pytorch-mnist-3", mnist("Master", "Worker", 3)).await;
    accepted::<PyTorchJob>(&ns, "pytorch-lower-case", mnist("master", "worker", 2)).await;
    let mut elastic_like = mnist("Master", "Worker", 2);
    elastic_like["nprocPerNode"] = json!("auto");
    elastic_like["runPolicy"] = json!({
        "cleanPodPolicy": "Running",
        "backoffLimit": 3,
        "activeDeadlineSeconds": 3600,
        "ttlSecondsAfterFinished": 0,
        "schedulingPolicy": { "minAvailable": 3, "queue": "default", "priorityClass": "high" },
        "suspend": false,
    });
    accepted::<PyTorchJob>(&ns, "pytorch-run-policy", elastic_like).await;

    let tf_command = ["python", "/var/tf_mnist/mnist_with_summaries.py"];
    let tf_image = "kubeflow/tf-mnist-with-summaries:latest";
    let tf_replica = |replicas| replica_of(replicas, container("tensorflow", tf_image, &tf_command));
    accepted::<TFJob>(
        &ns,
        "tfjob-simple",
        json!({ "tfReplicaSpecs": { "Worker": tf_replica(2) } }),
    )
    .await;
    accepted::<TFJob>(
        &ns,
        "tfjob-dist",
        json!({ "tfReplicaSpecs": {
            "Chief": tf_replica(1), "ps": tf_replica(2), "worker": tf_replica(4), "Evaluator": tf_replica(1)
        } }),
    )
    .await;

    // The typed API reads them back, and the scale subresource resizes PyTorch workers.
    let jobs: Api<PyTorchJob> = ns.api();
    let job = jobs.get("pytorch-lower-case").await.unwrap();
    assert_eq!(
        job.replica_specs().keys().collect::<Vec<_>>(),
        ["master", "worker"]
    );
    jobs.patch_scale(
        "pytorch-mnist-3",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "replicas": 5 } })),
    )
    .await
    .unwrap();
    let job = jobs.get("pytorch-mnist-3").await.unwrap();
    assert_eq!(job.replica_specs()["Worker"].replicas, Some(5));
}

/// A container port without a protocol reads back with `protocol: TCP`, as Kubeflow's CRDs and
/// Kueue's Workload CRD default it (else Kueue's Workload never matches the job); a given one and
/// every other field of the port stay as written, in containers and init containers alike.
#[tokio::test]
async fn port_protocol_defaults_to_tcp() {
    let ns = setup("protocol").await;
    let api = dynamic::<PyTorchJob>(ns.client(), ns.name());
    let ports = json!([
        { "name": "pytorchjob-port", "containerPort": 23456 },
        { "containerPort": 5353, "protocol": "UDP", "hostPort": 5353 },
    ]);
    let mut master = replica(1, "pytorch");
    master["template"]["spec"]["containers"][0]["ports"] = ports.clone();
    master["template"]["spec"]["initContainers"] =
        json!([{ "name": "init", "image": "busybox", "ports": ports }]);
    let spec = pytorch_spec(json!({ "Master": master }));
    api.create(&PostParams::default(), &object::<PyTorchJob>("ports", spec))
        .await
        .unwrap();
    let stored =
        api.get("ports").await.unwrap().data["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
            .clone();
    let expected = json!([
        { "name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP" },
        { "containerPort": 5353, "protocol": "UDP", "hostPort": 5353 },
    ]);
    assert_eq!(stored["containers"][0]["ports"], expected);
    assert_eq!(stored["initContainers"][0]["ports"], expected);
}
