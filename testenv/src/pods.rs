//! Driving pods on kwok nodes to a chosen end, for tests.
//!
//! kwok (see `testenv/controlplane/kwok.yaml`) moves a bound pod to Running. [`finish`] then
//! annotates it, and kwok's `kfop-pod-exit` Stage terminates every container with the given exit
//! code and restart count: phase Succeeded for 0, Failed otherwise. [`set_restart_count`] patches
//! the status directly for a pod that stays Running but has restarted (restartPolicy OnFailure).
//! A pod created with [`COMPLETE_AFTER_MS_ANNOTATION`] (see [`complete_after`]) needs no driving:
//! kwok's `kfop-pod-complete-after` Stage makes it Succeed that long after it started running.
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::{Error, Result};

pub const EXIT_CODE_ANNOTATION: &str = "kwok.kfop.dev/exit-code";
pub const RESTART_COUNT_ANNOTATION: &str = "kwok.kfop.dev/restart-count";
/// Milliseconds a running pod "trains" before kwok ends it with exit code 0 (phase Succeeded).
pub const COMPLETE_AFTER_MS_ANNOTATION: &str = "kwok.kfop.dev/complete-after-ms";

/// The annotation (key and value) to put on a pod, or a job's pod template, so that kwok ends it
/// with exit code 0 `run_for` after it started running.
pub fn complete_after(run_for: std::time::Duration) -> (&'static str, String) {
    (COMPLETE_AFTER_MS_ANNOTATION, run_for.as_millis().to_string())
}

/// Makes kwok terminate the running pod `name` with `exit_code` after `restart_count` restarts.
pub async fn finish(api: &Api<Pod>, name: &str, exit_code: i32, restart_count: i32) -> Result<()> {
    let patch = json!({ "metadata": { "annotations": {
        EXIT_CODE_ANNOTATION: exit_code.to_string(),
        RESTART_COUNT_ANNOTATION: restart_count.to_string(),
    }}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(Error::kube(format!(
            "annotating pod {name} to exit with {exit_code}"
        )))?;
    Ok(())
}

/// Sets `restartCount` of every container status of a running pod, as the kubelet would after
/// restarting it in place.
pub async fn set_restart_count(api: &Api<Pod>, name: &str, restart_count: i32) -> Result<()> {
    let pod = api
        .get_status(name)
        .await
        .map_err(Error::kube(format!("reading pod {name}")))?;
    let mut statuses = pod.status.and_then(|s| s.container_statuses).unwrap_or_default();
    for status in &mut statuses {
        status.restart_count = restart_count;
    }
    let patch = json!({ "status": { "containerStatuses": statuses } });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(Error::kube(format!("setting restart count of pod {name}")))?;
    Ok(())
}

/// The pod's phase, or "" when it has none yet.
pub fn phase(pod: &Pod) -> &str {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}
