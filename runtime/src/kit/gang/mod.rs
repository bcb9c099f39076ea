//! Gang scheduling (pure): the PodGroup a job needs under Volcano, scheduler-plugins or
//! Kubernetes' native gang scheduling, how its pods are pointed at it, and whether they wait for
//! it. Kubeflow's behaviour, from
//! `pkg/controller.v1/common/{job,scheduling,util}.go` and `control/podgroup_control.go`.
//!
//! The planner, per reconcile of an unfinished, unsuspended job, wants [`desired_pod_group`]
//! (an owned object, so it is created, patched and, once the job finishes or is suspended,
//! deleted like any other), holds new pods while [`holds_pods`], and passes each new pod through
//! [`decorate_pod_template`].
//!
//! Kueue pod groups ([`KueuePodGroup`]) are the same kind of plugin for Kueue's "pod"
//! integration: each pod of a job naming a LocalQueue is marked as a member of the job's group,
//! and the job reports that it waits while the group's Workload is not admitted.
mod decorate;
mod gating;
mod kueue;
mod min_resources;
mod podgroup;
mod quantity;
mod scheduler;
#[cfg(test)]
mod tests;

pub use decorate::{
    CUSTOM_SCHEDULER_MESSAGE, CUSTOM_SCHEDULER_REASON, SCHEDULER_PLUGINS_POD_GROUP_LABEL,
    VOLCANO_GROUP_NAME_ANNOTATION, VOLCANO_TASK_SPEC_ANNOTATION, custom_scheduler_set, decorate_pod_template,
};
pub use gating::holds_pods;
pub use kueue::{
    ADMISSION_GATE, Admission, KueuePodGroup, POD_FINALIZER, POD_GROUP_NAME_LABEL,
    POD_GROUP_TOTAL_COUNT_ANNOTATION, POD_INDEX_LABEL_ANNOTATION, PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL,
    RETRIABLE_IN_GROUP_ANNOTATION, ROLE_HASH_ANNOTATION, admission, group_name, pod_group, pod_patches,
    role_hash, workload_api_resource,
};
pub use min_resources::calc_min_resources;
pub use podgroup::{
    DEFAULT_QUEUE, JobRef, NativeSpec, PodGroupSpec, SchedulerPluginsSpec, VolcanoSpec, desired_pod_group,
    native_api_resource, scheduler_plugins_api_resource, volcano_api_resource,
};
pub use quantity::{Amount, QuantityError};
pub use scheduler::{
    DEFAULT_SCHEDULER_NAME, DEFAULT_SCHEDULER_PLUGINS_NAME, GangScheduler, NATIVE_FLAG,
    ParseGangSchedulerError, VOLCANO_SCHEDULER_NAME,
};
