{{ header }}
//! The objects a {{ m.kind }} owns besides its pods and services (the manifest's `resources`).
//! This file is yours: `kfop gen` never touches it.
use kfop_runtime::kube::api::{ApiResource, DynamicObject};
use kfop_runtime::plan::DesiredObject;
use kfop_runtime::{FrameworkError, JobContext};

use crate::api::{{ m.kind }};

/// Whether the engine creates pods for `role` itself.
pub fn creates_pods(role: &str) -> bool {
    let _ = role;
    true
}

/// Whether each replica gets a headless service named like its pod.
pub fn creates_services() -> bool {
    true
}

/// The kinds of the objects below; kfop watches them and deletes owned ones no longer wanted.
pub fn owned_kinds() -> Vec<ApiResource> {
    Vec::new()
}

/// The objects the job should own now; pure (no IO, no clock, no randomness).
pub fn desired_objects(ctx: &JobContext<'_, {{ m.kind }}>) -> Result<Vec<DesiredObject>, FrameworkError> {
    let _ = ctx;
    Ok(Vec::new())
}

/// Completes an object just before it is created (e.g. a generated key).
pub fn prepare_object(object: &mut DynamicObject) -> Result<(), FrameworkError> {
    let _ = object;
    Ok(())
}
