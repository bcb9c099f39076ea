//! What a job's reconcile sees: its pods and services from the shared caches, minus the ones
//! this process already deleted (the cache may not show the deletion yet).
use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;

use super::per_job::PerJob;
use crate::children::Children;
use crate::plan::{Observed, ObservedPod, ObservedService, Scheduling};

/// How long a deleted child is hidden if its deletion never shows up in the cache.
const FORGET_AFTER: Duration = Duration::from_secs(300);

/// Per job UID, the UIDs of children this process deleted, so a stale cache cannot make the
/// planner act on them twice (a second restart event, a double-counted metric).
pub type Deleted = PerJob<String, HashMap<String, Instant>>;

impl PerJob<String, HashMap<String, Instant>> {
    pub fn insert(&self, job_uid: &str, child_uid: String) {
        if let Some(mut by_job) = self.lock() {
            by_job
                .entry(job_uid.to_owned())
                .or_default()
                .insert(child_uid, Instant::now());
        }
    }
}

/// The children the job with `uid` controls, as the caches' owner indexes show them: pods,
/// services and owned objects of the framework's other kinds.
pub fn observe(
    uid: &str,
    pods: &Children<ObservedPod>,
    services: &Children<ObservedService>,
    objects: &[Children<DynamicObject>],
    scheduling: Scheduling,
    deleted: &Deleted,
) -> Observed {
    let mut observed = Observed {
        pods: pods.of(uid),
        services: services.of(uid),
        objects: objects.iter().flat_map(|o| o.of(uid)).collect(),
        scheduling,
    };
    let Some(mut by_job) = deleted.lock() else {
        return observed;
    };
    let Some(hidden) = by_job.get_mut(uid) else {
        return observed;
    };
    let cached = |child: &str| {
        let is = |meta: &ObjectMeta| meta.uid.as_deref() == Some(child);
        observed.pods.iter().any(|p| is(&p.metadata))
            || observed.services.iter().any(|s| is(&s.metadata))
            || observed.objects.iter().any(|o| is(&o.metadata))
    };
    hidden.retain(|child, at| at.elapsed() < FORGET_AFTER && cached(child));
    let visible = |meta: &ObjectMeta| meta.uid.as_ref().is_none_or(|u| !hidden.contains_key(u));
    observed.pods.retain(|p| visible(&p.metadata));
    observed.services.retain(|s| visible(&s.metadata));
    observed.objects.retain(|o| visible(&o.metadata));
    if hidden.is_empty() {
        by_job.remove(uid);
    }
    observed
}
