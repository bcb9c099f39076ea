//! A job's children as the caches show them, and the gang-scheduling setting a plan needs.
use std::sync::Arc;

use kube::api::DynamicObject;

use crate::child_view::{ObservedPod, ObservedService};
use crate::gang::GangScheduler;

/// The job's children as the caches see them (already filtered to those the job controls).
#[derive(Debug, Default, Clone)]
pub struct Observed {
    pub pods: Vec<Arc<ObservedPod>>,
    pub services: Vec<Arc<ObservedService>>,
    /// Owned objects of the framework's other kinds ([`Framework::owned_kinds`]) and the job's
    /// PodGroup.
    pub objects: Vec<Arc<DynamicObject>>,
    pub scheduling: Scheduling,
}

/// Gang scheduling as this operator runs it: the configured scheduler and the cluster's
/// PriorityClass values by name (for a PodGroup's minResources); and whether a job naming a
/// Kueue LocalQueue runs its pods as a Kueue pod group, with that group's Workload as Kueue's
/// cache shows it.
#[derive(Debug, Default, Clone)]
pub struct Scheduling {
    pub scheduler: GangScheduler,
    pub priority_classes: std::collections::BTreeMap<String, i32>,
    /// `--kueue-pod-groups`.
    pub kueue_pod_groups: bool,
    /// The Workload named after the job's pod group ([`crate::gang::group_name`]), if any.
    pub kueue_workload: Option<Arc<DynamicObject>>,
}

impl Scheduling {
    /// The Kueue pod group of `job` with replica `specs` (every role's pods count), when pod
    /// groups are on and the job names a LocalQueue.
    pub fn kueue_group<'a>(
        &self,
        job: &impl kube::Resource,
        specs: impl IntoIterator<Item = &'a crate::api::ReplicaSpec>,
    ) -> Option<crate::gang::KueuePodGroup> {
        let meta = job.meta();
        crate::gang::pod_group(
            self.kueue_pod_groups,
            meta.name.as_deref().unwrap_or_default(),
            meta.uid.as_deref().unwrap_or_default(),
            meta.labels.as_ref().unwrap_or(&std::collections::BTreeMap::new()),
            crate::api::ReplicaSpec::total(specs),
        )
    }
}
