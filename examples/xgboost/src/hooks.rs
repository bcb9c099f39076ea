// Scaffolded by kfop 0.1.0. This file is yours: `kfop gen` never changes it.
//! Hooks for what the manifest cannot say. This file is yours: `kfop gen` never touches it.
use std::collections::BTreeMap;

use kfop_runtime::api::ReplicaSpec;
use kfop_runtime::k8s_openapi::api::core::v1::PodTemplateSpec;
use kfop_runtime::plan::StatusUpdate;
use kfop_runtime::policy::SuccessPolicy;
use kfop_runtime::{FrameworkError, PodContext};

use crate::api::XGBoostJob;

/// Whether the pod of `role`/`index` is the job's master (labelled
/// `training.kubeflow.org/job-role=master`); `declared` is what the manifest's `master` flag says.
pub fn is_master(specs: &BTreeMap<String, ReplicaSpec>, role: &str, index: i32, declared: bool) -> bool {
    let _ = (specs, role, index);
    declared
}

/// Called for every pod before it is created, after the manifest's environment was injected.
pub fn decorate_pod(
    ctx: &PodContext<'_, XGBoostJob>,
    template: &mut PodTemplateSpec,
) -> Result<(), FrameworkError> {
    let _ = (ctx, template);
    Ok(())
}

/// Sets the job's conditions after its pods were reconciled; `policy` is the manifest's
/// success rule for this job.
pub fn update_status(job: &XGBoostJob, update: &mut StatusUpdate<'_, '_>, policy: &SuccessPolicy) {
    let _ = job;
    update.apply_policy(policy);
    update.announce_exit_code_restarts("XGBoostJob");
}
