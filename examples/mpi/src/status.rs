//! The MPIJob status, as mpi-operator's `updateMPIJobStatus` decides it: the launcher batch
//! Job's outcome is the job's; it runs once the launcher runs and every worker does.
use kfop_runtime::k8s_openapi::api::batch::v1::Job;
use kfop_runtime::kube::ResourceExt;
use kfop_runtime::kube::api::{ApiResource, DynamicObject};
use kfop_runtime::labels::REPLICA_TYPE;
use kfop_runtime::plan::{EventType, Observed, StatusUpdate, find};

use crate::api::MPIJob;

/// What the launcher Job reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launcher {
    /// Not created yet.
    Missing,
    Running {
        ready: i32,
        failed: i32,
    },
    Complete {
        failed: i32,
    },
    Failed {
        failed: i32,
        message: String,
    },
}

/// `<job>-launcher`: the launcher (a batch Job for v2beta1, a pod for v1) and, for v1, its
/// ServiceAccount, Role and RoleBinding.
pub fn launcher_name(job: &str) -> String {
    format!("{job}-launcher")
}

/// The launcher Job's state from the observed object.
pub fn launcher_state(job_name: &str, objects: &[std::sync::Arc<DynamicObject>]) -> Launcher {
    let resource = ApiResource::erase::<Job>(&());
    let Some(object) = find(objects, &resource, &launcher_name(job_name)) else {
        return Launcher::Missing;
    };
    let status = &object.data["status"];
    let count = |field: &str| {
        status[field]
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .unwrap_or(0)
    };
    let condition = |type_: &str| {
        status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == type_ && c["status"] == "True")
    };
    let failed = count("failed");
    if condition("Complete").is_some() {
        Launcher::Complete { failed }
    } else if let Some(c) = condition("Failed") {
        let message = c["message"].as_str().unwrap_or_default().to_owned();
        Launcher::Failed { failed, message }
    } else {
        Launcher::Running {
            ready: count("ready"),
            failed,
        }
    }
}

pub fn update_status(job: &MPIJob, update: &mut StatusUpdate<'_>) {
    let id = format!("{}/{}", update.namespace(), job.name_any());
    let launcher = launcher_state(&job.name_any(), &update.observed().objects);
    match launcher {
        Launcher::Missing => {}
        // Once the launcher is done mpi-operator counts no worker at all: they served it and
        // are then deleted or left alone, never succeeded or failed.
        Launcher::Complete { failed } => {
            update.set_replica_counts("Launcher", 0, 1, failed);
            update.set_replica_counts("Worker", 0, 0, 0);
            update.set_succeeded(format!("MPIJob {id} successfully completed."));
            return;
        }
        Launcher::Failed { failed, message } => {
            update.set_replica_counts("Launcher", 0, 0, failed);
            update.set_replica_counts("Worker", 0, 0, 0);
            let message = if message.is_empty() {
                format!("MPIJob {id} has failed")
            } else {
                message
            };
            update.set_failed(message);
            return;
        }
        Launcher::Running { ready, failed } => update.set_replica_counts("Launcher", ready, 0, failed),
    }
    // An evicted worker fails the job, without completion time: mpi-operator replaces no worker
    // and leaves the launcher Job running (`updateMPIJobStatus`).
    let evicted = evicted_workers(update.observed());
    if evicted > 0 {
        let workers = update.role("Worker").map_or(0, |w| w.replicas);
        update.set_failed_because("Evicted", format!("{evicted}/{workers} workers are evicted"));
        return;
    }
    let launcher_running = matches!(launcher, Launcher::Running { ready, .. } if ready >= 1);
    let workers_running = update.role("Worker").is_none_or(|w| w.active == w.replicas);
    if launcher_running && workers_running && update.set_running(format!("MPIJob {id} is running.")) {
        update.announce(EventType::Normal, "Running", format!("MPIJob {id} is running"));
    }
}

/// Worker pods the kubelet evicted (phase Failed, reason Evicted).
fn evicted_workers(observed: &Observed) -> usize {
    observed
        .pods
        .iter()
        .filter(|p| p.labels().get(REPLICA_TYPE).map(String::as_str) == Some("worker"))
        .filter_map(|p| p.status.as_ref())
        .filter(|s| s.phase.as_deref() == Some("Failed") && s.reason.as_deref() == Some("Evicted"))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kfop_runtime::serde_json::json;
    use std::sync::Arc;

    fn job_object(status: kfop_runtime::serde_json::Value) -> Arc<DynamicObject> {
        let resource = ApiResource::erase::<Job>(&());
        Arc::new(DynamicObject::new("pi-launcher", &resource).data(json!({ "status": status })))
    }

    #[test]
    fn the_launcher_job_decides() {
        assert_eq!(launcher_state("pi", &[]), Launcher::Missing);
        assert_eq!(
            launcher_state("pi", &[job_object(json!({"ready": 1, "failed": 1}))]),
            Launcher::Running { ready: 1, failed: 1 }
        );
        assert_eq!(
            launcher_state(
                "pi",
                &[job_object(json!({"succeeded": 1, "conditions": [
                    {"type": "SuccessCriteriaMet", "status": "True"},
                    {"type": "Complete", "status": "True"}]}))]
            ),
            Launcher::Complete { failed: 0 }
        );
        assert_eq!(
            launcher_state(
                "pi",
                &[job_object(json!({"failed": 2, "conditions": [
                    {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                     "message": "Job has reached the specified backoff limit"}]}))]
            ),
            Launcher::Failed {
                failed: 2,
                message: "Job has reached the specified backoff limit".to_owned()
            }
        );
        // A failed launcher pod alone (no Failed condition) does not fail the job.
        assert!(matches!(
            launcher_state("pi", &[job_object(json!({"failed": 1}))]),
            Launcher::Running { failed: 1, .. }
        ));
    }
}
