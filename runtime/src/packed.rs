//! Jobs as the controller caches them: metadata typed, the rest as its JSON bytes.
//!
//! A job's typed form is mostly empty space: each k8s-openapi `Container` is 2.1 kB and each
//! `PodSpec` 1.4 kB inline before a field is set, and a job holds a pod template per role. The
//! cache holds every live job for as long as it lives, a reconcile needs one at a time, so jobs
//! are cached as their JSON (about a tenth of the size) and unpacked for the reconcile or resync
//! that plans them.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::watcher::{self, Event};
use serde::de::{DeserializeOwned, Deserializer, Error as _};
use serde::{Deserialize, Serialize};

/// A cached job of kind `K`. Its metadata stays typed (the cache's keys, the controller's queue
/// and the stale-write check read it); the rest is `K` serialized with empty metadata.
pub struct Packed<K> {
    metadata: ObjectMeta,
    body: Box<[u8]>,
    kind: PhantomData<fn() -> K>,
}

impl<K: Resource + Serialize + DeserializeOwned> Packed<K> {
    /// Packs `job`; fails only where `K` cannot be written as JSON, which an object read from
    /// JSON always can.
    pub fn pack(mut job: K) -> serde_json::Result<Self> {
        let metadata = std::mem::take(job.meta_mut());
        Ok(Self {
            metadata,
            body: serde_json::to_vec(&job)?.into_boxed_slice(),
            kind: PhantomData,
        })
    }

    /// The job as the watch delivered it.
    pub fn unpack(&self) -> serde_json::Result<K> {
        let mut job: K = serde_json::from_slice(&self.body)?;
        *job.meta_mut() = self.metadata.clone();
        Ok(job)
    }
}

/// A watch event of jobs, packed. A job that cannot be packed is a watch error (which names
/// it), not a silently missing job.
pub fn packed<K: Resource + Serialize + DeserializeOwned>(
    event: Result<Event<K>, watcher::Error>,
) -> Result<Event<Packed<K>>, watcher::Error> {
    let pack =
        |job: K| Packed::pack(job).map_err(|e| watcher::Error::WatchFailed(kube::Error::SerdeError(e)));
    Ok(match event? {
        Event::Apply(job) => Event::Apply(pack(job)?),
        Event::Delete(job) => Event::Delete(pack(job)?),
        Event::Init => Event::Init,
        Event::InitApply(job) => Event::InitApply(pack(job)?),
        Event::InitDone => Event::InitDone,
    })
}

impl<K: Resource> Resource for Packed<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }
    fn api_version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::api_version(dt)
    }
    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

// kube-runtime's controller asks for a deserializable kind; it is only ever handed packed jobs.
impl<'de, K: Resource + Serialize + DeserializeOwned> Deserialize<'de> for Packed<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Self::pack(K::deserialize(deserializer)?).map_err(D::Error::custom)
    }
}

// Written out so that neither needs `K: Clone` / `K: Debug`, and Debug shows the size, not bytes.
impl<K> Clone for Packed<K> {
    fn clone(&self) -> Self {
        Self {
            metadata: self.metadata.clone(),
            body: self.body.clone(),
            kind: PhantomData,
        }
    }
}

impl<K> fmt::Debug for Packed<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Packed")
            .field("metadata", &self.metadata)
            .field("body_bytes", &self.body.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use kube::ResourceExt;

    use super::*;
    use crate::testing::{TestJob, job, replica};

    fn sample() -> TestJob {
        let mut j = job(
            "ns",
            "a",
            &[("Master", replica(1, None)), ("Worker", replica(3, None))],
        );
        j.metadata.uid = Some("uid-a".into());
        j.metadata.resource_version = Some("42".into());
        j.labels_mut().insert("team".into(), "x".into());
        j
    }

    #[test]
    fn unpacks_to_the_job_it_packed() {
        let original = sample();
        let packed = Packed::pack(original.clone()).unwrap();
        assert_eq!(
            serde_json::to_value(packed.unpack().unwrap()).unwrap(),
            serde_json::to_value(&original).unwrap()
        );
        assert_eq!(packed.name_any(), "a");
        assert_eq!(packed.namespace().as_deref(), Some("ns"));
        assert_eq!(packed.resource_version().as_deref(), Some("42"));
        assert_eq!(
            Packed::<TestJob>::kind(&()),
            TestJob::kind(&()),
            "the cache and queue key jobs as their own kind"
        );
    }

    #[test]
    fn the_body_holds_no_metadata() {
        let packed = Packed::pack(sample()).unwrap();
        let body: serde_json::Value = serde_json::from_slice(&packed.body).unwrap();
        assert_eq!(body["metadata"], serde_json::json!({}));
    }

    #[test]
    fn deserializing_packs() {
        let json = serde_json::to_vec(&sample()).unwrap();
        let packed: Packed<TestJob> = serde_json::from_slice(&json).unwrap();
        assert_eq!(packed.metadata, sample().metadata);
        assert_eq!(
            serde_json::to_value(packed.unpack().unwrap()).unwrap(),
            serde_json::to_value(sample()).unwrap()
        );
    }

    fn variant<T>(event: &Event<T>) -> &'static str {
        match event {
            Event::Init => "Init",
            Event::InitApply(_) => "InitApply",
            Event::InitDone => "InitDone",
            Event::Apply(_) => "Apply",
            Event::Delete(_) => "Delete",
        }
    }

    #[test]
    fn watch_events_are_packed_one_for_one() {
        for event in [
            Event::Init,
            Event::InitApply(sample()),
            Event::InitDone,
            Event::Apply(sample()),
            Event::Delete(sample()),
        ] {
            let expected = variant(&event);
            let got = packed(Ok(event)).unwrap();
            assert_eq!(variant(&got), expected);
            if let Event::InitApply(j) | Event::Apply(j) | Event::Delete(j) = got {
                assert_eq!(j.unpack().unwrap().metadata, sample().metadata);
            }
        }
    }
}
