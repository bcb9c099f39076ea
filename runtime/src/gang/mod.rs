//! Gang scheduling (pure): the PodGroup a job needs under Volcano or scheduler-plugins, how its
//! pods are pointed at it, and whether they wait for it. Kubeflow's behaviour, from
//! `pkg/controller.v1/common/{job,scheduling,util}.go` and `control/podgroup_control.go`.
//!
//! A planner calls, per reconcile of an unfinished, unsuspended job:
//! 1. [`plan_pod_group`] with the observed PodGroup (if any) and the PriorityClass values: it
//!    says whether to create or update the PodGroup, and whether pods must wait ([`GangPlan`]);
//! 2. [`decorate_pod_template`] on each pod template it builds (after the framework's own
//!    decoration), and [`custom_scheduler_set`] for Kubeflow's warning event.
//!
//! A finished or suspended job's PodGroup (named after the job) is deleted by the caller.
mod decorate;
mod gating;
mod min_resources;
mod podgroup;
mod quantity;
mod scheduler;
#[cfg(test)]
mod tests;
mod update;

use std::collections::BTreeMap;

use kube::api::DynamicObject;

pub use decorate::{
    CUSTOM_SCHEDULER_MESSAGE, CUSTOM_SCHEDULER_REASON, SCHEDULER_PLUGINS_POD_GROUP_LABEL,
    VOLCANO_GROUP_NAME_ANNOTATION, VOLCANO_TASK_SPEC_ANNOTATION, custom_scheduler_set, decorate_pod_template,
};
pub use gating::holds_pods;
pub use min_resources::calc_min_resources;
pub use podgroup::{
    DEFAULT_QUEUE, JobRef, PodGroupSpec, SchedulerPluginsSpec, VolcanoSpec, desired_pod_group,
    scheduler_plugins_api_resource, volcano_api_resource,
};
pub use quantity::{Amount, QuantityError};
pub use scheduler::{
    DEFAULT_SCHEDULER_PLUGINS_NAME, GangScheduler, ParseGangSchedulerError, VOLCANO_SCHEDULER_NAME,
};
pub use update::{needs_update, pod_group_update};

use crate::api::{ReplicaSpec, RunPolicy};

/// A write to the job's PodGroup.
#[derive(Clone, Debug, PartialEq)]
pub enum PodGroupWrite {
    Create(DynamicObject),
    /// The observed object with the desired spec fields (and its resourceVersion, for a replace).
    Update(DynamicObject),
}

/// What gang scheduling asks of one reconcile.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GangPlan {
    /// `None` when gang scheduling is off or the PodGroup is already as desired.
    pub write: Option<PodGroupWrite>,
    /// Create no pods this reconcile (Volcano has not admitted the PodGroup); Kubeflow then
    /// touches `status.lastReconcileTime` and waits for the PodGroup's next change.
    pub hold_pods: bool,
}

/// The PodGroup write and pod gate for a job. `specs` are the defaulted replica specs,
/// `priority_classes` the PriorityClass values by name, `observed` the job's PodGroup as cached.
pub fn plan_pod_group(
    scheduler: &GangScheduler,
    job: &JobRef,
    run_policy: &RunPolicy,
    specs: &BTreeMap<String, ReplicaSpec>,
    priority_classes: &BTreeMap<String, i32>,
    observed: Option<&DynamicObject>,
) -> Result<GangPlan, QuantityError> {
    let Some(desired) = desired_pod_group(scheduler, job, run_policy, specs, priority_classes, observed)?
    else {
        return Ok(GangPlan::default());
    };
    let write = match observed {
        None => Some(PodGroupWrite::Create(desired)),
        Some(observed) => pod_group_update(observed, &desired).map(PodGroupWrite::Update),
    };
    Ok(GangPlan {
        write,
        hold_pods: holds_pods(scheduler, observed),
    })
}
