//! Jobs as the controller caches them: metadata typed, the rest as its JSON bytes, of any kind.
//!
//! A job's typed form is mostly empty space: each k8s-openapi `Container` is 2.1 kB and each
//! `PodSpec` 1.4 kB inline before a field is set, and a job holds a pod template per role. The
//! cache holds every live job for as long as it lives, a reconcile needs one at a time, so jobs
//! are cached as their JSON (about a tenth of the size) and unpacked for the reconcile or resync
//! that plans them. A packed job does not name its Rust type, only its API resource: the watch
//! reads it straight from the wire (never through the typed job), and one controller loop,
//! cache and queue serve every kind, compiled or registered at run time.

use std::borrow::Cow;
use std::fmt;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::ApiResource;
use serde::de::{DeserializeOwned, Deserializer, Error as _, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

/// A cached job. Its metadata stays typed (the cache's keys, the controller's queue and the
/// stale-write check read it); the rest is the job's JSON object with empty `metadata` (which
/// typed jobs require).
#[derive(Clone)]
pub struct PackedJob {
    metadata: ObjectMeta,
    body: Box<[u8]>,
}

impl PackedJob {
    /// Packs `job`; fails only where `K` cannot be written as JSON, which an object read from
    /// JSON always can.
    pub fn pack<K: Resource + Serialize>(mut job: K) -> serde_json::Result<Self> {
        let metadata = std::mem::take(job.meta_mut());
        Ok(Self {
            metadata,
            body: serde_json::to_vec(&job)?.into_boxed_slice(),
        })
    }

    /// The job as the watch delivered it, typed.
    pub fn unpack<K: Resource + DeserializeOwned>(&self) -> serde_json::Result<K> {
        let mut job: K = serde_json::from_slice(&self.body)?;
        *job.meta_mut() = self.metadata.clone();
        Ok(job)
    }
}

impl Resource for PackedJob {
    type DynamicType = ApiResource;
    type Scope = NamespaceResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.kind)
    }
    fn group(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.group)
    }
    fn version(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.version)
    }
    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.api_version)
    }
    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.plural)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Reads `metadata` typed and every other field of the object into the body.
impl<'de> Deserialize<'de> for PackedJob {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(PackedVisitor)
    }
}

struct PackedVisitor;

impl<'de> Visitor<'de> for PackedVisitor {
    type Value = PackedJob;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PackedJob, A::Error> {
        let mut metadata = None;
        let mut rest = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "metadata" {
                metadata = Some(map.next_value::<ObjectMeta>()?);
                rest.insert(key, serde_json::Value::Object(serde_json::Map::new()));
            } else {
                rest.insert(key, map.next_value()?);
            }
        }
        Ok(PackedJob {
            metadata: metadata.ok_or_else(|| A::Error::missing_field("metadata"))?,
            body: serde_json::to_vec(&rest)
                .map_err(A::Error::custom)?
                .into_boxed_slice(),
        })
    }
}

// Debug shows the body's size, not its bytes.
impl fmt::Debug for PackedJob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PackedJob")
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
        let packed = PackedJob::pack(original.clone()).unwrap();
        assert_eq!(
            serde_json::to_value(packed.unpack::<TestJob>().unwrap()).unwrap(),
            serde_json::to_value(&original).unwrap()
        );
        assert_eq!(packed.name_any(), "a");
        assert_eq!(packed.namespace().as_deref(), Some("ns"));
        assert_eq!(packed.resource_version().as_deref(), Some("42"));
        let kind = ApiResource::erase::<TestJob>(&());
        assert_eq!(
            PackedJob::kind(&kind),
            TestJob::kind(&()),
            "the cache and queue key jobs as their own kind"
        );
        assert_eq!(PackedJob::plural(&kind), TestJob::plural(&()));
    }

    #[test]
    fn the_body_holds_empty_metadata() {
        let packed = PackedJob::pack(sample()).unwrap();
        let body: serde_json::Value = serde_json::from_slice(&packed.body).unwrap();
        assert_eq!(body["metadata"], serde_json::json!({}));
        assert!(body.get("spec").is_some(), "{body}");
    }

    #[test]
    fn deserializing_packs_without_the_typed_job() {
        let json = serde_json::to_vec(&sample()).unwrap();
        let packed: PackedJob = serde_json::from_slice(&json).unwrap();
        assert_eq!(packed.metadata, sample().metadata);
        let body: serde_json::Value = serde_json::from_slice(&packed.body).unwrap();
        assert_eq!(body["metadata"], serde_json::json!({}));
        assert_eq!(
            serde_json::to_value(packed.unpack::<TestJob>().unwrap()).unwrap(),
            serde_json::to_value(sample()).unwrap()
        );
    }

    #[test]
    fn a_list_item_without_api_version_and_kind_unpacks() {
        // A list response names apiVersion and kind once for the list, not on each item.
        let mut json = serde_json::to_value(sample()).unwrap();
        let fields = json.as_object_mut().unwrap();
        fields.remove("apiVersion");
        fields.remove("kind");
        let packed: PackedJob = serde_json::from_value(json).unwrap();
        assert_eq!(packed.unpack::<TestJob>().unwrap().spec, sample().spec);
    }

    #[test]
    fn an_object_without_metadata_is_an_error_naming_it() {
        let error = serde_json::from_str::<PackedJob>(r#"{"spec": {}}"#).unwrap_err();
        assert!(error.to_string().contains("metadata"), "{error}");
    }
}
