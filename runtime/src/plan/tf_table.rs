//! Kubeflow's TFJob status table (`pkg/controller.v1/tensorflow/status_test.go`, 19 cases) run
//! through the planner with a framework whose status hook is TFJob's `UpdateJobStatus`.
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::*;
use crate::api::{JobConditionType as C, RestartPolicy};
use crate::framework::{FrameworkInfo, Role};
use crate::testing::{TestJob, job, replica};

/// TFJob's replica types in the order its status function visits them.
const TF_ORDER: [&str; 5] = ["Chief", "Evaluator", "Master", "PS", "Worker"];

struct Tf {
    info: FrameworkInfo,
    all_workers: bool,
}

impl Tf {
    fn new(all_workers: bool) -> Self {
        let role = |n: &str| Role::new(n, RestartPolicy::Never);
        Self {
            info: FrameworkInfo {
                controller_name: "tfjob-controller".into(),
                framework_name: "tensorflow".into(),
                default_container: "tensorflow".into(),
                default_port_name: "tfjob-port".into(),
                default_port: 2222,
                roles: TF_ORDER.iter().map(|r| role(r)).collect(),
            },
            all_workers,
        }
    }
}

impl Framework for Tf {
    type Job = TestJob;

    fn info(&self) -> &FrameworkInfo {
        &self.info
    }

    /// TFJob's `UpdateJobStatus`, transcribed.
    fn update_status(&self, _job: &TestJob, u: &mut StatusUpdate<'_>) {
        let (ns, name) = (u.namespace().to_owned(), u.name().to_owned());
        let has_chief = u.specs().contains_key("Chief") || u.specs().contains_key("Master");
        let worker0_completed = u.role("Worker").is_none_or(|w| w.completed_indices.contains(&0));
        let restarting = u.status().condition(C::Restarting).is_some();
        for rtype in TF_ORDER {
            let Some(r) = u.role(rtype) else { continue };
            let (expected, running, failed) = (r.replicas - r.succeeded, r.active, r.failed);
            if has_chief {
                if matches!(rtype, "Chief" | "Master") {
                    if running > 0 {
                        u.set_running(format!("TFJob {ns}/{name} is running."));
                    }
                    if expected == 0 {
                        u.set_succeeded(format!("TFJob {ns}/{name} successfully completed."));
                    }
                }
            } else if rtype == "Worker" {
                if expected == 0 || (worker0_completed && !self.all_workers) {
                    u.set_succeeded(format!("TFJob {ns}/{name} successfully completed."));
                } else if running > 0 {
                    u.set_running(format!("TFJob {ns}/{name} is running."));
                }
            }
            if failed > 0 {
                if restarting {
                    u.set_restarting(format!(
                        "job {name} is restarting because {rtype} replica(s) failed."
                    ));
                } else {
                    u.set_failed(format!(
                        "TFJob {ns}/{name} has failed because {failed} {rtype} replica(s) failed."
                    ));
                }
            }
        }
    }
}

/// failed / succeeded / active pods of one replica type.
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

fn tf_pod(job: &TestJob, framework: &Tf, role: &str, index: i32, phase: &str, exit: Option<i32>) -> Arc<Pod> {
    let specs = crate::defaults::defaulted_specs(framework.info(), &job.spec.replica_specs);
    let mut pod = build_pod(
        framework,
        job,
        &specs,
        (role, index),
        &crate::gang::GangScheduler::None,
    )
    .unwrap()
    .pod;
    pod.metadata.uid = Some(format!("uid-{role}-{index}"));
    let mut status = json!({ "phase": phase });
    if let Some(code) = exit {
        status["containerStatuses"] = json!([{ "name": "tensorflow", "image": "i", "imageID": "", "ready": false,
            "restartCount": 0, "state": { "terminated": { "exitCode": code } } }]);
    }
    pod.status = Some(serde_json::from_value(status).unwrap());
    Arc::new(pod)
}

/// Pods of one replica type, indices in the order succeeded, failed, active (as Kubeflow's test).
fn pods_for(job: &TestJob, fw: &Tf, role: &str, (failed, succeeded, active): Fsa, c: &Case) -> Vec<Arc<Pod>> {
    let mut pods = Vec::new();
    let mut index = 0;
    for _ in 0..succeeded {
        let exit = (c.worker0_completed && index == 0).then_some(0);
        pods.push(tf_pod(job, fw, role, index, "Succeeded", exit));
        index += 1;
    }
    for _ in 0..failed {
        pods.push(tf_pod(job, fw, role, index, "Failed", c.restart.then_some(130)));
        index += 1;
    }
    for _ in 0..active {
        pods.push(tf_pod(job, fw, role, index, "Running", None));
        index += 1;
    }
    pods
}

#[test]
fn tfjob_status_table() {
    let policy = |c: &Case| c.restart.then_some(RestartPolicy::ExitCode);
    for (i, c) in CASES.iter().enumerate() {
        let fw = Tf::new(c.all_workers);
        let mut roles = Vec::new();
        if c.workers > 0 {
            roles.push(("Worker", replica(c.workers, policy(c))));
        }
        if c.ps > 0 {
            roles.push(("PS", replica(c.ps, policy(c))));
        }
        if c.chief {
            roles.push(("Chief", replica(1, policy(c))));
        }
        let j = job("default", &format!("test-status-{i}"), &roles);
        let mut pods = pods_for(&j, &fw, "PS", c.ps_pods, c);
        pods.extend(pods_for(&j, &fw, "Worker", c.worker_pods, c));
        pods.extend(pods_for(&j, &fw, "Chief", c.chief_pods, c));
        let now = Time(Timestamp::from_second(1_700_000_000).unwrap());
        let p = plan(
            &fw,
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
