//! A child pod or service as the shared caches hold it: only what reconciles read back.
use std::borrow::Cow;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{Pod, PodStatus, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::PartialObjectMeta;
use serde::Deserialize;

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
