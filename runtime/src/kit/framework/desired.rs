//! The objects a framework wants its job to own besides pods and services, and how to find the
//! observed ones.
use std::sync::Arc;

use kube::ResourceExt;
use kube::api::{ApiResource, DynamicObject};

/// Whether an existing object is kept in line with the wanted one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncPolicy {
    /// Merge-patched whenever a field kfop sets differs.
    Sync,
    /// Created when missing, then left alone (an SSH Secret keeps its key; a Job's template is
    /// immutable).
    CreateOnly,
}

/// An object the job should own.
#[derive(Debug, Clone)]
pub struct DesiredObject {
    pub resource: ApiResource,
    pub object: DynamicObject,
    pub policy: SyncPolicy,
}

impl DesiredObject {
    /// `object` of `resource`, with its apiVersion and kind set from it.
    pub fn new(resource: &ApiResource, mut object: DynamicObject, policy: SyncPolicy) -> Self {
        object.types = Some(kube::api::TypeMeta {
            api_version: resource.api_version.clone(),
            kind: resource.kind.clone(),
        });
        Self {
            resource: resource.clone(),
            object,
            policy,
        }
    }
}

/// Whether `object` is of `resource`'s kind (apiVersion and kind as the API server reports them).
pub fn is_kind(object: &DynamicObject, resource: &ApiResource) -> bool {
    object
        .types
        .as_ref()
        .is_some_and(|t| t.kind == resource.kind && t.api_version == resource.api_version)
}

/// The observed object of `resource`'s kind named `name`.
pub fn find<'a>(
    observed: &'a [Arc<DynamicObject>],
    resource: &ApiResource,
    name: &str,
) -> Option<&'a DynamicObject> {
    observed
        .iter()
        .map(AsRef::as_ref)
        .find(|o| is_kind(o, resource) && o.name_any() == name)
}
