#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The generated CRDs on a real kube-apiserver: invalid jobs are rejected at admission with a
//! message naming the field, and Kubeflow's example jobs are accepted unchanged.
mod kinds;

use kfop_runtime::TrainingJob;
use kfop_runtime::kube::Resource;
use kfop_runtime::kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kfop_runtime::kube::{Client, CustomResourceExt};
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

fn pytorch(specs: Value) -> Value {
    json!({ "pytorchReplicaSpecs": specs })
}

fn master_worker() -> Value {
    pytorch(json!({ "Master": replica(1, "pytorch"), "Worker": replica(2, "pytorch") }))
}

fn with_run_policy(run_policy: Value) -> Value {
    let mut spec = master_worker();
    spec["runPolicy"] = run_policy;
    spec
}

#[derive(Clone, Copy)]
enum Kind {
    PyTorch,
    Tf,
}

struct Case {
    what: &'static str,
    kind: Kind,
    spec: Value,
    /// Fragments the API server's message must contain: the field and what is wrong.
    expect: &'static [&'static str],
}

fn cases() -> Vec<Case> {
    let worker = |replicas, restart: &str| {
        let mut r = replica(replicas, "pytorch");
        r["restartPolicy"] = json!(restart);
        r
    };
    vec![
        Case {
            what: "unknown replica type Launcher",
            kind: Kind::PyTorch,
            spec: pytorch(json!({ "Master": replica(1, "pytorch"), "Launcher": replica(1, "pytorch") })),
            expect: &[
                "spec.pytorchReplicaSpecs",
                "has an unknown replica type: use only Master, Worker",
            ],
        },
        Case {
            what: "Worker and worker both",
            kind: Kind::PyTorch,
            spec: pytorch(json!({ "Worker": replica(1, "pytorch"), "worker": replica(1, "pytorch") })),
            expect: &["spec.pytorchReplicaSpecs", "twice in different letter case"],
        },
        Case {
            what: "no replica types",
            kind: Kind::PyTorch,
            spec: pytorch(json!({})),
            expect: &["spec.pytorchReplicaSpecs must not be empty"],
        },
        Case {
            what: "replica specs missing",
            kind: Kind::PyTorch,
            spec: json!({ "runPolicy": {} }),
            expect: &["spec.pytorchReplicaSpecs: Required value"],
        },
        Case {
            what: "Master replicas 2 (max 1)",
            kind: Kind::PyTorch,
            spec: pytorch(json!({ "Master": replica(2, "pytorch") })),
            expect: &["spec.pytorchReplicaSpecs.Master.replicas must be 1"],
        },
        Case {
            what: "master replicas 0 (min 1, lower-case key)",
            kind: Kind::PyTorch,
            spec: pytorch(json!({ "master": replica(0, "pytorch") })),
            expect: &["spec.pytorchReplicaSpecs.Master.replicas must be 1"],
        },
        Case {
            what: "Worker replicas -1",
            kind: Kind::PyTorch,
            spec: pytorch(json!({ "Worker": replica(-1, "pytorch") })),
            expect: &[
                "spec.pytorchReplicaSpecs[Worker].replicas",
                "must not be negative",
            ],
        },
        Case {
            what: "restartPolicy Sometimes",
            kind: Kind::PyTorch,
            spec: pytorch(json!({ "Worker": worker(1, "Sometimes") })),
            expect: &[
                "spec.pytorchReplicaSpecs.Worker.restartPolicy",
                "Unsupported value: \"Sometimes\"",
            ],
        },
        Case {
            what: "cleanPodPolicy Some",
            kind: Kind::PyTorch,
            spec: with_run_policy(json!({ "cleanPodPolicy": "Some" })),
            expect: &["spec.runPolicy.cleanPodPolicy", "Unsupported value: \"Some\""],
        },
        Case {
            what: "backoffLimit -1",
            kind: Kind::PyTorch,
            spec: with_run_policy(json!({ "backoffLimit": -1 })),
            expect: &["spec.runPolicy.backoffLimit must not be negative"],
        },
        Case {
            what: "activeDeadlineSeconds -5",
            kind: Kind::PyTorch,
            spec: with_run_policy(json!({ "activeDeadlineSeconds": -5 })),
            expect: &["spec.runPolicy.activeDeadlineSeconds must not be negative"],
        },
        Case {
            what: "ttlSecondsAfterFinished -1",
            kind: Kind::PyTorch,
            spec: with_run_policy(json!({ "ttlSecondsAfterFinished": -1 })),
            expect: &["spec.runPolicy.ttlSecondsAfterFinished must not be negative"],
        },
        Case {
            what: "TFJob with Chief and Master",
            kind: Kind::Tf,
            spec: json!({ "tfReplicaSpecs": {
                "Chief": replica(1, "tensorflow"),
                "Master": replica(1, "tensorflow"),
            } }),
            expect: &["spec.tfReplicaSpecs may have only one of Chief, Master"],
        },
        Case {
            what: "TFJob Evaluator replicas 2 (max 1)",
            kind: Kind::Tf,
            spec: json!({ "tfReplicaSpecs": {
                "Worker": replica(2, "tensorflow"),
                "Evaluator": replica(2, "tensorflow"),
            } }),
            expect: &["spec.tfReplicaSpecs.Evaluator.replicas must be at most 1"],
        },
    ]
}

/// The message of the API server's rejection, or a description of what happened instead.
async fn rejection(api: &Api<DynamicObject>, obj: &DynamicObject) -> Result<String, String> {
    match api.create(&PostParams::default(), obj).await {
        Err(kfop_runtime::kube::Error::Api(status)) if status.code == 422 => Ok(status.message),
        Err(e) => Err(format!("unexpected error: {e}")),
        Ok(_) => Err("accepted".to_owned()),
    }
}

#[tokio::test]
async fn invalid_jobs_are_rejected_at_admission() {
    let ns = setup("admission").await;
    let pytorch = dynamic::<PyTorchJob>(ns.client(), ns.name());
    let tf = dynamic::<TFJob>(ns.client(), ns.name());
    let mut failures = Vec::new();
    println!("| input | API server message |\n|---|---|");
    for (i, case) in cases().into_iter().enumerate() {
        let name = format!("bad-{i}");
        let result = match case.kind {
            Kind::PyTorch => rejection(&pytorch, &object::<PyTorchJob>(&name, case.spec)).await,
            Kind::Tf => rejection(&tf, &object::<TFJob>(&name, case.spec)).await,
        };
        match result {
            Ok(message) => {
                println!("| {} | {message} |", case.what);
                if let Some(missing) = case.expect.iter().find(|e| !message.contains(**e)) {
                    failures.push(format!("{}: message lacks {missing:?}: {message}", case.what));
                }
            }
            Err(e) => failures.push(format!("{}: not rejected: {e}", case.what)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
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
                    "spec.runPolicy.schedulingPolicy.queue: Invalid value: \"string\": spec.runPolicy.schedulingPolicy.queue is immutable"
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
