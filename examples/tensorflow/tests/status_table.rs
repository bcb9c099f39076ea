#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Kubeflow's TFJob status table (`pkg/controller.v1/tensorflow/status_test.go`, 19 cases) run
//! through the planner with the shipped TFJob framework, hooks included. Pure: no control plane.
use std::sync::Arc;

use kfop_runtime::ObservedPod;
use kfop_runtime::TrainingJob;
use kfop_runtime::api::JobConditionType as C;
use kfop_runtime::defaults::defaulted_specs;
use kfop_runtime::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kfop_runtime::k8s_openapi::jiff::Timestamp;
use kfop_runtime::plan::{Observed, Scheduling, build_pod, plan};
use serde_json::{Value, json};
use tensorflow_operator::{TFJob, framework};

type Fsa = (i32, i32, i32);

struct Case {
    name: &'static str,
    workers: i32,
    ps: i32,
    chief: bool,
    all_workers: bool,
    ps_pods: Fsa,
    worker_pods: Fsa,
    chief_pods: Fsa,
    restart: bool,
    worker0_completed: bool,
    expected: C,
}

const fn case(
    name: &'static str,
    (workers, ps, chief, all_workers): (i32, i32, bool, bool),
    ps_pods: Fsa,
    worker_pods: Fsa,
    chief_pods: Fsa,
    (restart, worker0_completed): (bool, bool),
    expected: C,
) -> Case {
    Case {
        name,
        workers,
        ps,
        chief,
        all_workers,
        ps_pods,
        worker_pods,
        chief_pods,
        restart,
        worker0_completed,
        expected,
    }
}

const NONE: Fsa = (0, 0, 0);
const CASES: [Case; 19] = [
    case(
        "Chief worker is succeeded",
        (1, 0, true, false),
        NONE,
        (0, 1, 0),
        (0, 1, 0),
        (false, false),
        C::Succeeded,
    ),
    case(
        "Chief worker is running",
        (1, 0, true, false),
        NONE,
        NONE,
        (0, 0, 1),
        (false, false),
        C::Running,
    ),
    case(
        "Chief worker is failed",
        (1, 0, true, false),
        NONE,
        NONE,
        (1, 0, 0),
        (false, false),
        C::Failed,
    ),
    case(
        "(No chief worker) Worker is failed",
        (1, 0, false, false),
        NONE,
        (1, 0, 0),
        NONE,
        (false, false),
        C::Failed,
    ),
    case(
        "(No chief worker) Worker is succeeded",
        (1, 0, false, false),
        NONE,
        (0, 1, 0),
        NONE,
        (false, false),
        C::Succeeded,
    ),
    case(
        "(No chief worker) Worker is running",
        (1, 0, false, false),
        NONE,
        (0, 0, 1),
        NONE,
        (false, false),
        C::Running,
    ),
    case(
        "(No chief worker) 2 workers are succeeded, 2 workers are active",
        (4, 2, false, false),
        (0, 0, 2),
        (0, 2, 2),
        NONE,
        (false, false),
        C::Running,
    ),
    case(
        "(No chief worker) 2 workers are running, 2 workers are failed",
        (4, 2, false, false),
        (0, 0, 2),
        (2, 0, 2),
        NONE,
        (false, false),
        C::Failed,
    ),
    case(
        "(No chief worker) 2 workers are succeeded, 2 workers are failed",
        (4, 2, false, false),
        (0, 0, 2),
        (2, 2, 0),
        NONE,
        (false, false),
        C::Failed,
    ),
    case(
        "(No chief worker) worker-0 are succeeded, 3 workers are active",
        (4, 2, false, false),
        (0, 0, 2),
        (0, 1, 3),
        NONE,
        (false, true),
        C::Succeeded,
    ),
    case(
        "(No chief worker, successPolicy: AllWorkers) worker-0 are succeeded, 3 workers are active",
        (4, 0, false, true),
        NONE,
        (0, 1, 3),
        NONE,
        (false, true),
        C::Running,
    ),
    case(
        "(No chief worker, successPolicy: AllWorkers) 4 workers are succeeded",
        (4, 0, false, true),
        NONE,
        (0, 4, 0),
        NONE,
        (false, true),
        C::Succeeded,
    ),
    case(
        "(No chief worker, successPolicy: AllWorkers) worker-0 is succeeded, 2 workers are running, 1 worker is failed",
        (4, 0, false, true),
        NONE,
        (1, 1, 2),
        NONE,
        (false, true),
        C::Failed,
    ),
    case(
        "Chief is running, workers are failed",
        (4, 2, true, false),
        (0, 0, 2),
        (4, 0, 0),
        (0, 0, 1),
        (false, false),
        C::Running,
    ),
    case(
        "Chief is running, workers are succeeded",
        (4, 2, true, false),
        (0, 0, 2),
        (0, 4, 0),
        (0, 0, 1),
        (false, false),
        C::Running,
    ),
    case(
        "Chief is running, a PS is failed",
        (4, 2, true, false),
        (1, 0, 1),
        (0, 4, 0),
        (0, 0, 1),
        (false, false),
        C::Failed,
    ),
    case(
        "Chief is failed, workers are succeeded",
        (4, 2, true, false),
        (0, 0, 2),
        (0, 4, 0),
        (1, 0, 0),
        (false, false),
        C::Failed,
    ),
    case(
        "Chief is succeeded, workers are failed",
        (4, 2, true, false),
        (0, 0, 2),
        (4, 0, 0),
        (0, 1, 0),
        (false, false),
        C::Succeeded,
    ),
    case(
        "Chief is failed and restarting",
        (4, 2, true, false),
        (0, 0, 2),
        (4, 0, 0),
        (1, 0, 0),
        (true, false),
        C::Restarting,
    ),
];

fn tf_pod(job: &TFJob, role: &str, index: i32, phase: &str, exit: Option<i32>) -> Arc<ObservedPod> {
    let tf = framework(Default::default()).unwrap();
    let specs = defaulted_specs(tf.info(), job.replica_specs());
    let mut pod = build_pod(&tf, job, &specs, (role, index), &Scheduling::default())
        .unwrap()
        .pod;
    pod.metadata.uid = Some(format!("uid-{role}-{index}"));
    let mut status = json!({ "phase": phase });
    if let Some(code) = exit {
        status["containerStatuses"] = json!([{ "name": "tensorflow", "image": "i", "imageID": "", "ready": false,
            "restartCount": 0, "state": { "terminated": { "exitCode": code } } }]);
    }
    pod.status = Some(serde_json::from_value(status).unwrap());
    Arc::new(pod.into())
}

/// Pods of one replica type, indices in the order succeeded, failed, active (as Kubeflow's test).
fn pods_for(job: &TFJob, role: &str, (failed, succeeded, active): Fsa, c: &Case) -> Vec<Arc<ObservedPod>> {
    let mut pods = Vec::new();
    let mut index = 0;
    for _ in 0..succeeded {
        let exit = (c.worker0_completed && index == 0).then_some(0);
        pods.push(tf_pod(job, role, index, "Succeeded", exit));
        index += 1;
    }
    for _ in 0..failed {
        pods.push(tf_pod(job, role, index, "Failed", c.restart.then_some(130)));
        index += 1;
    }
    for _ in 0..active {
        pods.push(tf_pod(job, role, index, "Running", None));
        index += 1;
    }
    pods
}

/// A TFJob with these roles, restartPolicy ExitCode when the case restarts (else Never).
fn tf_job(name: &str, roles: &[(&str, i32)], c: &Case) -> TFJob {
    let policy = if c.restart { "ExitCode" } else { "Never" };
    let specs: serde_json::Map<String, Value> = roles
        .iter()
        .map(|(role, replicas)| {
            let spec = json!({ "replicas": replicas, "restartPolicy": policy, "template": { "spec": {
                "containers": [{ "name": "tensorflow", "image": "busybox" }] } } });
            ((*role).to_owned(), spec)
        })
        .collect();
    let mut spec = json!({ "tfReplicaSpecs": specs });
    if c.all_workers {
        spec["successPolicy"] = json!("AllWorkers");
    }
    serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": { "name": name, "namespace": "default", "uid": format!("uid-{name}") },
        "spec": spec,
    }))
    .unwrap()
}

#[test]
fn tfjob_status_table() {
    for (i, c) in CASES.iter().enumerate() {
        let mut roles = Vec::new();
        if c.workers > 0 {
            roles.push(("Worker", c.workers));
        }
        if c.ps > 0 {
            roles.push(("PS", c.ps));
        }
        if c.chief {
            roles.push(("Chief", 1));
        }
        let j = tf_job(&format!("test-status-{i}"), &roles, c);
        let mut pods = pods_for(&j, "PS", c.ps_pods, c);
        pods.extend(pods_for(&j, "Worker", c.worker_pods, c));
        pods.extend(pods_for(&j, "Chief", c.chief_pods, c));
        let now = Time(Timestamp::from_second(1_700_000_000).unwrap());
        let p = plan(
            &framework(Default::default()).unwrap(),
            &j,
            &Observed {
                pods,
                ..Observed::default()
            },
            &now,
        )
        .unwrap();
        let status = p.status.unwrap();
        // Kubeflow's two assertions: no Running=True next to a finished condition, and a
        // condition of the expected type.
        if status.is(C::Failed) || status.is(C::Succeeded) {
            assert!(
                !status.is(C::Running),
                "case {i} ({}): Running=True on a finished job",
                c.name
            );
        }
        assert!(
            status.conditions.iter().any(|cond| cond.type_ == c.expected),
            "case {i} ({}): expected a {:?} condition, got {:?}",
            c.name,
            c.expected,
            status
                .conditions
                .iter()
                .map(|c| (c.type_, c.status))
                .collect::<Vec<_>>()
        );
    }
}
