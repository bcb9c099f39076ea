//! What a job's reconcile sees: its pods and services from the shared caches, plus the ones this
//! process just created and minus the ones it already deleted (the cache may not show either
//! yet).
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;

use super::per_job::PerJob;
use crate::child_index::Children;
use crate::compact::{CachedPod, CachedService};
use crate::framework::observed_service;
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

/// How long a created child stands in for its cache entry. The watch normally delivers it within
/// a second; past this the cache is trusted again, and at worst the planner creates the child a
/// second time, which the server answers with a harmless 409.
const SHOW_CREATED_FOR: Duration = Duration::from_secs(30);

/// A pod or service as its create returned it.
#[derive(Debug, Clone)]
pub enum NewChild {
    Pod(Arc<ObservedPod>),
    Service(Arc<ObservedService>),
}

/// Per job UID, the pods and services this process created that the caches did not show yet, so
/// the reconcile that its own status write triggers right after does not create them again (at
/// 1,000 jobs the pod watch lagged often enough for 1.0 create conflicts per job).
pub type Created = PerJob<String, Vec<(Instant, NewChild)>>;

impl From<Pod> for NewChild {
    fn from(mut pod: Pod) -> Self {
        crate::cache::slim(&mut pod);
        let mut pod = ObservedPod::from(pod);
        crate::cache::slim_pod(&mut pod);
        Self::Pod(Arc::new(pod))
    }
}

impl From<Service> for NewChild {
    fn from(mut service: Service) -> Self {
        crate::cache::slim(&mut service);
        Self::Service(Arc::new(observed_service(service)))
    }
}

impl PerJob<String, Vec<(Instant, NewChild)>> {
    pub fn insert(&self, job_uid: &str, child: NewChild) {
        if let Some(mut by_job) = self.lock() {
            by_job
                .entry(job_uid.to_owned())
                .or_default()
                .push((Instant::now(), child));
        }
    }
}

/// Adds the children of job `uid` created by this process and missing from the caches to
/// `observed`; forgets those the caches now show (by name: a child recreated meanwhile is the
/// cache's) and those older than [`SHOW_CREATED_FOR`].
fn add_created(uid: &str, observed: &mut Observed, created: &Created) {
    let Some(mut by_job) = created.lock() else {
        return;
    };
    let Some(children) = by_job.get_mut(uid) else {
        return;
    };
    let named = |meta: &ObjectMeta, name: &Option<String>| meta.name == *name;
    children.retain(|(at, child)| {
        at.elapsed() < SHOW_CREATED_FOR
            && match child {
                NewChild::Pod(pod) => !observed
                    .pods
                    .iter()
                    .any(|p| named(&p.metadata, &pod.metadata.name)),
                NewChild::Service(service) => !observed
                    .services
                    .iter()
                    .any(|s| named(&s.metadata, &service.metadata.name)),
            }
    });
    for (_, child) in children.iter() {
        match child {
            NewChild::Pod(pod) => observed.pods.push(pod.clone()),
            NewChild::Service(service) => observed.services.push(service.clone()),
        }
    }
    if children.is_empty() {
        by_job.remove(uid);
    }
}

/// The children the job with `uid` controls, as the caches' owner indexes show them (pods,
/// services and owned objects of the framework's other kinds), with this process's own recent
/// creates and deletes applied.
pub fn observe(
    uid: &str,
    pods: &Children<CachedPod>,
    services: &Children<CachedService>,
    objects: &[Children<DynamicObject>],
    scheduling: Scheduling,
    created: &Created,
    deleted: &Deleted,
) -> Observed {
    let mut observed = Observed {
        pods: pods.of(uid),
        services: services.of(uid),
        objects: objects.iter().flat_map(|o| o.of(uid)).collect(),
        scheduling,
    };
    add_created(uid, &mut observed, created);
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
    // A pod the cache shows terminating is no longer stale: the planner sees it (and waits for
    // it to go, says so when it does not, and neither deletes nor counts it again). Hidden, its
    // slot looked empty, and its replacement was created into a 409 on every pass, silently,
    // while a pod whose kubelet is gone stayed.
    observed
        .pods
        .retain(|p| p.metadata.deletion_timestamp.is_some() || visible(&p.metadata));
    observed.services.retain(|s| visible(&s.metadata));
    observed.objects.retain(|o| visible(&o.metadata));
    if hidden.is_empty() {
        by_job.remove(uid);
    }
    observed
}

#[cfg(test)]
mod tests {
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;
    use serde_json::json;

    use super::*;
    use crate::relist::Settled;

    fn pod(name: &str, uid: &str) -> Pod {
        serde_json::from_value(json!({ "metadata": { "name": name, "namespace": "ns", "uid": uid,
            "ownerReferences": [{ "apiVersion": "v1", "kind": "J", "name": "j", "uid": "job", "controller": true }] },
            "spec": { "containers": [{ "name": "main" }] } }))
        .unwrap()
    }

    fn names(observed: &Observed) -> Vec<String> {
        let mut names: Vec<String> = observed
            .pods
            .iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn own_creates_show_until_the_cache_does_and_own_deletes_hide() {
        let (store, mut writer) = reflector::store::<CachedPod>();
        let pods = Children::new(store, ());
        let services = Children::new(reflector::store::<CachedService>().0, ());
        let (created, deleted) = (Created::default(), Deleted::default());
        let look = || {
            observe(
                "job",
                &pods,
                &services,
                &[],
                Scheduling::default(),
                &created,
                &deleted,
            )
        };

        created.insert("job", pod("j-0", "u0").into());
        created.insert("job", pod("j-1", "u1").into());
        assert_eq!(names(&look()), ["j-0", "j-1"], "created, not yet cached");

        // The watch delivers j-0: the cache's copy is shown, once.
        let cached = CachedPod::from(ObservedPod::from(pod("j-0", "u0")));
        writer.apply_watcher_event(&Event::Apply(cached.clone()));
        pods.record(&Settled::Present(cached));
        assert_eq!(names(&look()), ["j-0", "j-1"]);
        assert_eq!(created.lock().unwrap()["job"].len(), 1, "j-0 is the cache's now");

        // Deleted before the cache saw it: hidden, though the create is remembered.
        deleted.insert("job", "u1".to_owned());
        assert_eq!(names(&look()), ["j-0"]);

        // An old create is the cache's business again (a second create would get a 409).
        created.lock().unwrap().get_mut("job").unwrap()[0].0 -= SHOW_CREATED_FOR;
        assert_eq!(names(&look()), ["j-0"]);
        assert!(created.is_empty(), "a job with nothing left is forgotten");
    }
}
