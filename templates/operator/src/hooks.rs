{{ header }}
//! Hooks for what the manifest cannot say. This file is yours: `kfop gen` never touches it.
use kfop_runtime::k8s_openapi::api::core::v1::PodTemplateSpec;
use kfop_runtime::plan::StatusUpdate;
use kfop_runtime::policy::SuccessPolicy;
use kfop_runtime::{FrameworkError, PodContext};

use crate::api::{{ m.kind }};

/// Called for every pod before it is created, after the manifest's environment was injected.
pub fn decorate_pod(ctx: &PodContext<'_, {{ m.kind }}>, template: &mut PodTemplateSpec) -> Result<(), FrameworkError> {
    let _ = (ctx, template);
    Ok(())
}

/// Sets the job's conditions after its pods were reconciled; `policy` is the manifest's
/// success rule for this job.
pub fn update_status(job: &{{ m.kind }}, update: &mut StatusUpdate<'_, '_>, policy: &SuccessPolicy) {
    let _ = job;
    update.apply_policy(policy);
}
