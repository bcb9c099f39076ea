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
/// PriorityClass values by name (for a PodGroup's minResources).
#[derive(Debug, Default, Clone)]
pub struct Scheduling {
    pub scheduler: GangScheduler,
    pub priority_classes: std::collections::BTreeMap<String, i32>,
}
