// Scaffolded by kfop 0.1.0. This file is yours: `kfop gen` never changes it.
//! Hooks for what the manifest cannot say. This file is yours: `kfop gen` never touches it.
use std::collections::BTreeMap;

use kfop_runtime::api::ReplicaSpec;
use kfop_runtime::k8s_openapi::api::core::v1::PodTemplateSpec;
use kfop_runtime::plan::StatusUpdate;
use kfop_runtime::policy::SuccessPolicy;
use kfop_runtime::{FrameworkError, PodContext};

use crate::api::JAXJob;

/// Whether the pod of `role`/`index` is the job's master (labelled
/// `training.kubeflow.org/job-role=master`); `declared` is what the manifest's `master` flag says.
/// Kubeflow's JAX `IsMasterRole`: index 0 of any role (the coordinator is worker 0).
pub fn is_master(specs: &BTreeMap<String, ReplicaSpec>, role: &str, index: i32, declared: bool) -> bool {
    let _ = (specs, role, declared);
    index == 0
}

/// Called for every pod before it is created, after the manifest's environment was injected.
pub fn decorate_pod(
    ctx: &PodContext<'_, JAXJob>,
    template: &mut PodTemplateSpec,
) -> Result<(), FrameworkError> {
    let _ = (ctx, template);
    Ok(())
}

/// Sets the job's conditions after its pods were reconciled; `policy` is the manifest's
/// success rule for this job.
/// Kubeflow's JAXJob status function is its PyTorchJob one without a master: every worker
/// succeeded is success, a running worker Running, a failed worker not running again a restart
/// (with its Warning event on every pass that sees it) or, under restartPolicy Never, the job's
/// failure; its messages.
pub fn update_status(job: &JAXJob, update: &mut StatusUpdate<'_, '_>, policy: &SuccessPolicy) {
    let _ = (job, policy);
    // A JAXJob has no Master role, so the Workers decide alone.
    update.apply_leader_or_followers("Master", "Worker", false);
}
