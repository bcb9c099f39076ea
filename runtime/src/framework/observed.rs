//! A job's children as the caches show them, and the gang-scheduling setting a plan needs.
use std::borrow::Cow;
use std::sync::Arc;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{Pod, PodStatus, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::{DynamicObject, PartialObjectMeta};
use serde::Deserialize;

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

/// A child pod as cached: its metadata and status. The planner builds pods from the job's
/// templates and never reads a spec back, and a `Pod` holds its spec inline (1.4 kB per cached
/// pod even when empty); watch events deserialize into this type and skip the spec.
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
pub struct ObservedPod {
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub status: Option<PodStatus>,
}

/// A child service as cached: its metadata, from a metadata-only watch (nothing reads its spec).
pub type ObservedService = PartialObjectMeta<Service>;

impl From<Pod> for ObservedPod {
    fn from(pod: Pod) -> Self {
        Self {
            metadata: pod.metadata,
            status: pod.status,
        }
    }
}

/// A service as a metadata-only watch shows it.
pub fn observed_service(service: Service) -> ObservedService {
    use kube::core::PartialObjectMetaExt;
    service.metadata.into_response_partial::<Service>()
}

impl Resource for ObservedPod {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        Pod::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        Pod::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        Pod::version(dt)
    }
    fn api_version(dt: &()) -> Cow<'_, str> {
        Pod::api_version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        Pod::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Gang scheduling as this operator runs it: the configured scheduler and the cluster's
/// PriorityClass values by name (for a PodGroup's minResources).
#[derive(Debug, Default, Clone)]
pub struct Scheduling {
    pub scheduler: GangScheduler,
    pub priority_classes: std::collections::BTreeMap<String, i32>,
}
