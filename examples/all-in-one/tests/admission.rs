#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Issue #12's bad-input table: the CRDs of every bundled kind on a real kube-apiserver reject
//! invalid jobs at admission (422, with a message naming the field), and a valid job of each kind
//! is accepted, so the table cannot pass by rejecting everything. `--nocapture` prints it.
use kfop_operator::samples;
use kfop_operator::schemes::{self, Scheme};
use kfop_runtime::serde_json::{Value, json};
use kfop_testenv::TestEnv;
use kfop_testenv::admission::{self, Case, Verdict};

/// A replica of `n` pods running one container `container`.
fn replica(n: i64, container: &str) -> Value {
    json!({ "replicas": n, "template": { "spec": { "containers": [
        { "name": container, "image": "busybox" }
    ] } } })
}

/// A job of each kind as Kubeflow's (and mpi-operator's) examples write them.
fn valid(scheme: Scheme) -> Value {
    match scheme {
        Scheme::TfJob => json!({ "tfReplicaSpecs": {
            "PS": replica(1, "tensorflow"), "Worker": replica(2, "tensorflow"),
        } }),
        Scheme::PyTorchJob => json!({ "pytorchReplicaSpecs": {
            "Master": replica(1, "pytorch"), "Worker": replica(2, "pytorch"),
        } }),
        // mpi-operator names no container: its examples call them mpi-launcher and mpi-worker.
        Scheme::MpiJob => json!({ "slotsPerWorker": 1, "mpiReplicaSpecs": {
            "Launcher": replica(1, "mpi-launcher"), "Worker": replica(2, "mpi-worker"),
        } }),
        Scheme::XgBoostJob => json!({ "xgbReplicaSpecs": {
            "Master": replica(1, "xgboost"), "Worker": replica(2, "xgboost"),
        } }),
        Scheme::PaddleJob => json!({ "paddleReplicaSpecs": { "Worker": replica(2, "paddle") } }),
        Scheme::JaxJob => json!({ "jaxReplicaSpecs": { "Worker": replica(2, "jax") } }),
        Scheme::MxJob => json!({ "jobMode": "MXTrain", "mxReplicaSpecs": {
            "Scheduler": replica(1, "mxnet"), "Server": replica(1, "mxnet"), "Worker": replica(2, "mxnet"),
        } }),
    }
}

/// `spec` with the value at `pointer` (a JSON pointer; missing objects on the way are created)
/// set, or removed if `value` is null.
fn with(mut spec: Value, pointer: &str, value: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let mut node = &mut spec;
    for part in parent.split('/').skip(1) {
        node = match node {
            Value::Array(items) => &mut items[part.parse::<usize>().unwrap()],
            _ => node
                .as_object_mut()
                .unwrap()
                .entry(part)
                .or_insert_with(|| json!({})),
        };
    }
    let object = node.as_object_mut().unwrap();
    if value.is_null() {
        object.remove(key);
    } else {
        object.insert(key.to_owned(), value);
    }
    spec
}

/// An invalid case: the kind's valid job with `pointer` set to `value`.
fn bad(scheme: Scheme, what: &str, pointer: &str, value: Value, expect: &[&str]) -> Case {
    bad_spec(scheme, what, with(valid(scheme), pointer, value), expect)
}

fn bad_spec(scheme: Scheme, what: &str, spec: Value, expect: &[&str]) -> Case {
    Case::new(
        what,
        &samples::api_resource(scheme),
        "job",
        spec,
        Verdict::rejected(expect),
    )
}

/// The kind's valid job under an invalid name.
fn bad_name(scheme: Scheme, name: &str, expect: &[&str]) -> Case {
    let what = match name.len() {
        ..=20 => format!("name {name:?}"),
        len => format!("name of {len} characters"),
    };
    Case::new(
        what,
        &samples::api_resource(scheme),
        name,
        valid(scheme),
        Verdict::rejected(expect),
    )
}

const DNS_1035: &[&str] = &["metadata.name must be a DNS-1035 label"];
const TOO_LONG: &[&str] = &["metadata.name is too long for the job's pod and Service names"];

/// The rows that hold for every kind alike: a valid job is accepted; its queue and its
/// managedBy are immutable; managedBy names a known controller (Kubeflow v1.9's webhook rules).
fn every_kind(scheme: Scheme) -> [Case; 4] {
    let resource = samples::api_resource(scheme);
    let queued = with(
        valid(scheme),
        "/runPolicy/schedulingPolicy/queue",
        json!("research"),
    );
    let moved = json!({ "spec": { "runPolicy": { "schedulingPolicy": { "queue": "prod" } } } });
    let immutable = Verdict::rejected(&[
        "spec.runPolicy.schedulingPolicy.queue: Invalid value: \"prod\": spec.runPolicy.schedulingPolicy.queue is immutable",
    ]);
    let managed = |by: &str| with(valid(scheme), "/runPolicy/managedBy", json!(by));
    let handed_over = json!({ "spec": { "runPolicy": { "managedBy": "kubeflow.org/training-operator" } } });
    [
        Case::new("valid job", &resource, "valid", valid(scheme), Verdict::Accepted),
        Case::new("queue changed", &resource, "queued", queued, immutable).changed(moved),
        Case::new(
            "managedBy an unknown controller",
            &resource,
            "managed-elsewhere",
            managed("kueue.x-k8s.io/other-controller"),
            Verdict::rejected(&["spec.runPolicy.managedBy must be one of"]),
        ),
        Case::new(
            "managedBy changed",
            &resource,
            "managed-by-kueue",
            managed("kueue.x-k8s.io/multikueue"),
            Verdict::rejected(&["spec.runPolicy.managedBy is immutable"]),
        )
        .changed(handed_over),
    ]
}

/// Kubeflow's webhooks want a container named after the framework in every replica (not
/// mpi-operator: its valid job above has none).
fn unnamed_container(scheme: Scheme, specs: &str, role: &str, container: &str) -> Case {
    let pointer = format!("/{specs}/{role}/template/spec/containers/0/name");
    let message = format!(
        "spec.{specs}: Required value: spec.{specs}[*].template.spec.containers must include a container named {container}"
    );
    bad(
        scheme,
        &format!("{role} container named main"),
        &pointer,
        json!("main"),
        &[&message],
    )
}

fn cases() -> Vec<Case> {
    use Scheme::{JaxJob as Jax, MpiJob as Mpi, MxJob as Mx, PaddleJob as Paddle, PyTorchJob as PyTorch};
    use Scheme::{TfJob as Tf, XgBoostJob as Xgb};
    let sixty = "a".repeat(60);
    let mut cases = vec![
        // Names: a Service name is a DNS-1035 label of at most 63 characters.
        bad_name(Tf, "1job", DNS_1035),
        bad_name(PyTorch, "job.v2", DNS_1035),
        bad_name(Jax, "2jax", DNS_1035),
        bad_name(Mpi, &"m".repeat(64), TOO_LONG),
        bad_name(Xgb, &sixty, TOO_LONG),
        bad_name(Paddle, &sixty, TOO_LONG),
        // Unknown replica types, and replica bounds.
        bad(
            Tf,
            "unknown replica type Launcher",
            "/tfReplicaSpecs/Launcher",
            replica(1, "tensorflow"),
            &[
                "spec.tfReplicaSpecs has an unknown replica type: use only Chief, Evaluator, Master, PS, Worker",
            ],
        ),
        bad(
            Mpi,
            "Worker renamed Master",
            "/mpiReplicaSpecs",
            json!({ "Launcher": replica(1, "mpi-launcher"), "Master": replica(1, "mpi") }),
            &["spec.mpiReplicaSpecs has an unknown replica type: use only Launcher, Worker"],
        ),
        // A map with more keys than roles fails `maxProperties` (which bounds the CEL rules' cost)
        // before the rules run.
        bad(
            Mpi,
            "unknown replica type Master besides Launcher and Worker",
            "/mpiReplicaSpecs/Master",
            replica(1, "mpi"),
            &["spec.mpiReplicaSpecs: Too many: 3: must have at most 2 items"],
        ),
        bad(
            Paddle,
            "unknown replica type PS",
            "/paddleReplicaSpecs/PS",
            replica(1, "paddle"),
            &["spec.paddleReplicaSpecs has an unknown replica type: use only Master, Worker"],
        ),
        bad(
            Jax,
            "Worker renamed Master",
            "/jaxReplicaSpecs",
            json!({ "Master": replica(2, "jax") }),
            &["spec.jaxReplicaSpecs has an unknown replica type: use only Worker"],
        ),
        bad(
            Mx,
            "unknown replica type Chief",
            "/mxReplicaSpecs/Chief",
            replica(1, "mxnet"),
            &["spec.mxReplicaSpecs has an unknown replica type: use only Scheduler, Server, Worker"],
        ),
        bad(
            Mx,
            "Worker and worker both",
            "/mxReplicaSpecs/worker",
            replica(1, "mxnet"),
            &["spec.mxReplicaSpecs names a replica type twice in different letter case"],
        ),
        bad(
            Jax,
            "no replica types",
            "/jaxReplicaSpecs",
            json!({}),
            &["spec.jaxReplicaSpecs must not be empty: add at least one of Worker"],
        ),
        bad(
            Tf,
            "Chief replicas 2 (max 1)",
            "/tfReplicaSpecs/Chief",
            replica(2, "tensorflow"),
            &["spec.tfReplicaSpecs.Chief.replicas must be at most 1"],
        ),
        bad(
            PyTorch,
            "Master replicas 2",
            "/pytorchReplicaSpecs/Master/replicas",
            json!(2),
            &["spec.pytorchReplicaSpecs.Master.replicas must be 1"],
        ),
        bad(
            Xgb,
            "Master replicas 0",
            "/xgbReplicaSpecs/Master/replicas",
            json!(0),
            &["spec.xgbReplicaSpecs.Master.replicas must be 1"],
        ),
        bad(
            Xgb,
            "no Master",
            "/xgbReplicaSpecs/Master",
            Value::Null,
            &["spec.xgbReplicaSpecs: Required value: spec.xgbReplicaSpecs.Master is required"],
        ),
        bad(
            Mpi,
            "no Launcher",
            "/mpiReplicaSpecs/Launcher",
            Value::Null,
            &["spec.mpiReplicaSpecs: Required value: spec.mpiReplicaSpecs.Launcher is required"],
        ),
        bad(
            Mpi,
            "Launcher replicas 2",
            "/mpiReplicaSpecs/Launcher/replicas",
            json!(2),
            &["spec.mpiReplicaSpecs.Launcher.replicas must be 1"],
        ),
        bad(
            Mpi,
            "Worker replicas 0",
            "/mpiReplicaSpecs/Worker/replicas",
            json!(0),
            &["spec.mpiReplicaSpecs.Worker.replicas must be at least 1"],
        ),
        bad(
            Paddle,
            "Worker replicas -1",
            "/paddleReplicaSpecs/Worker/replicas",
            json!(-1),
            &["spec.paddleReplicaSpecs[*].replicas must not be negative"],
        ),
        // Negative limits.
        bad(
            Xgb,
            "backoffLimit -1",
            "/runPolicy/backoffLimit",
            json!(-1),
            &["spec.runPolicy.backoffLimit must not be negative"],
        ),
        bad(
            Paddle,
            "activeDeadlineSeconds -5",
            "/runPolicy/activeDeadlineSeconds",
            json!(-5),
            &["spec.runPolicy.activeDeadlineSeconds must not be negative"],
        ),
        bad(
            Jax,
            "ttlSecondsAfterFinished -1",
            "/runPolicy/ttlSecondsAfterFinished",
            json!(-1),
            &["spec.runPolicy.ttlSecondsAfterFinished must not be negative"],
        ),
        bad(
            Mpi,
            "slotsPerWorker -1",
            "/slotsPerWorker",
            json!(-1),
            &["spec.slotsPerWorker", "greater than or equal to 0"],
        ),
        bad(
            PyTorch,
            "elastic minReplicas 0",
            "/elasticPolicy/minReplicas",
            json!(0),
            &["spec.elasticPolicy.minReplicas", "greater than or equal to 1"],
        ),
        bad(
            PyTorch,
            "elastic maxReplicas -1",
            "/elasticPolicy/maxReplicas",
            json!(-1),
            &["spec.elasticPolicy.maxReplicas", "greater than or equal to 1"],
        ),
        bad(
            PyTorch,
            "elastic maxRestarts -1",
            "/elasticPolicy/maxRestarts",
            json!(-1),
            &["spec.elasticPolicy.maxRestarts", "greater than or equal to 0"],
        ),
        // Enums.
        bad(
            PyTorch,
            "restartPolicy Sometimes",
            "/pytorchReplicaSpecs/Worker/restartPolicy",
            json!("Sometimes"),
            &[
                "spec.pytorchReplicaSpecs.Worker.restartPolicy",
                "Unsupported value: \"Sometimes\"",
            ],
        ),
        bad(
            Mpi,
            "restartPolicy Always",
            "/mpiReplicaSpecs/Worker/restartPolicy",
            json!("Always"),
            &["spec.mpiReplicaSpecs[*].restartPolicy must be Never or OnFailure"],
        ),
        bad(
            Mpi,
            "cleanPodPolicy Some",
            "/runPolicy/cleanPodPolicy",
            json!("Some"),
            &["spec.runPolicy.cleanPodPolicy", "Unsupported value: \"Some\""],
        ),
        bad(
            Mpi,
            "mpiImplementation OpenMP",
            "/mpiImplementation",
            json!("OpenMP"),
            &["spec.mpiImplementation", "Unsupported value: \"OpenMP\""],
        ),
        bad(
            Tf,
            "successPolicy AllChiefs",
            "/successPolicy",
            json!("AllChiefs"),
            &["spec.successPolicy", "Unsupported value: \"AllChiefs\""],
        ),
        bad(
            Mx,
            "jobMode MXRun",
            "/jobMode",
            json!("MXRun"),
            &["spec.jobMode", "Unsupported value: \"MXRun\""],
        ),
        // Containers and images.
        bad(
            PyTorch,
            "no containers",
            "/pytorchReplicaSpecs/Worker/template/spec/containers",
            json!([]),
            &[
                "spec.pytorchReplicaSpecs.Worker.template.spec.containers",
                "at least 1 items",
            ],
        ),
        bad(
            Paddle,
            "no template",
            "/paddleReplicaSpecs/Worker/template",
            Value::Null,
            &["spec.paddleReplicaSpecs.Worker.template.spec: Required value"],
        ),
        bad(
            Xgb,
            "container without image",
            "/xgbReplicaSpecs/Worker/template/spec/containers/0/image",
            Value::Null,
            &["spec.xgbReplicaSpecs.Worker.template.spec.containers[0].image: Required value"],
        ),
        bad(
            Paddle,
            "container with image \"\"",
            "/paddleReplicaSpecs/Worker/template/spec/containers/0/image",
            json!(""),
            &[
                "spec.paddleReplicaSpecs.Worker.template.spec.containers[0].image",
                "at least 1 chars long",
            ],
        ),
        bad(
            Mpi,
            "container without name",
            "/mpiReplicaSpecs/Worker/template/spec/containers/0/name",
            Value::Null,
            &["spec.mpiReplicaSpecs.Worker.template.spec.containers[0].name: Required value"],
        ),
        unnamed_container(Tf, "tfReplicaSpecs", "Worker", "tensorflow"),
        unnamed_container(PyTorch, "pytorchReplicaSpecs", "Worker", "pytorch"),
        unnamed_container(Xgb, "xgbReplicaSpecs", "Master", "xgboost"),
        unnamed_container(Paddle, "paddleReplicaSpecs", "Worker", "paddle"),
        unnamed_container(Jax, "jaxReplicaSpecs", "Worker", "jax"),
        unnamed_container(Mx, "mxReplicaSpecs", "Server", "mxnet"),
        // Conflicting elastic settings.
        bad(
            PyTorch,
            "elastic minReplicas 3 > maxReplicas 2",
            "/elasticPolicy",
            json!({ "minReplicas": 3, "maxReplicas": 2 }),
            &["spec.elasticPolicy.minReplicas must not be above spec.elasticPolicy.maxReplicas"],
        ),
        bad_spec(
            PyTorch,
            "elasticPolicy.nProcPerNode with nprocPerNode",
            with(
                with(valid(PyTorch), "/elasticPolicy/nProcPerNode", json!(2)),
                "/nprocPerNode",
                json!("2"),
            ),
            &[
                "spec.elasticPolicy.nProcPerNode: Forbidden: spec.elasticPolicy.nProcPerNode must not be used with spec.nprocPerNode",
            ],
        ),
    ];
    cases.extend(Scheme::ALL.into_iter().flat_map(|(_, scheme)| every_kind(scheme)));
    cases
}

#[tokio::test]
async fn invalid_jobs_of_every_kind_are_rejected_with_the_field() {
    let env = TestEnv::shared().unwrap();
    let all = schemes::parse(&[]).unwrap();
    env.install_crds(all.iter().map(|s| kfop_operator::crds::of(*s)))
        .await
        .unwrap();
    let ns = env.namespace("admission").await.unwrap();
    let cases = cases();
    let report = admission::run(ns.client(), ns.name(), &cases).await;
    println!("{}", report.table);
    assert!(report.failures.is_empty(), "{}", report.failures.join("\n"));

    // Every kind has a valid job and at least two invalid ones.
    for (_, scheme) in Scheme::ALL {
        let kind = samples::api_resource(scheme).kind;
        let rows = cases.iter().filter(|c| c.resource.kind == kind);
        let invalid = rows.filter(|c| c.verdict.is_rejected()).count();
        println!("{kind}: {invalid} invalid");
        assert!(invalid >= 2, "{kind} has {invalid} invalid cases");
    }
    assert!(cases.iter().filter(|c| c.verdict.is_rejected()).count() >= 30);
}
