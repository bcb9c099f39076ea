//! Objects a job owns besides its pods and services (MPI's ConfigMap, Secret and launcher Job, a
//! PodGroup, an HPA): what the framework wants, diffed against what the caches show.
//!
//! An owned object of a watched kind that is no longer wanted is deleted; a wanted one that is
//! missing is created; one whose wanted fields differ is merge-patched. Comparing only the
//! fields kfop sets (a subset check) leaves defaults and fields of other writers alone, so an
//! unchanged object costs no request.
use std::sync::Arc;

use kube::api::{ApiResource, DynamicObject};
use kube::{Resource, ResourceExt};
use serde_json::Value;

use super::ChildRef;
use crate::framework::{DesiredObject, SyncPolicy, find, is_kind};

/// An owned object to delete.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectRef {
    pub resource: ApiResource,
    pub child: ChildRef,
}

/// What to do about owned objects.
#[derive(Debug, Default)]
pub struct ObjectChanges {
    pub create: Vec<DesiredObject>,
    pub patch: Vec<DesiredObject>,
    pub delete: Vec<ObjectRef>,
}

/// Diffs `desired` against the `observed` owned objects of the watched `kinds`.
pub fn diff(
    desired: Vec<DesiredObject>,
    observed: &[Arc<DynamicObject>],
    kinds: &[ApiResource],
) -> ObjectChanges {
    let mut changes = ObjectChanges::default();
    for kind in kinds {
        for object in observed.iter().filter(|o| is_kind(o, kind)) {
            let wanted = desired
                .iter()
                .any(|d| d.resource.kind == kind.kind && d.object.name_any() == object.name_any());
            if !wanted && object.meta().deletion_timestamp.is_none() {
                changes.delete.push(ObjectRef {
                    resource: kind.clone(),
                    child: ChildRef::of(object.as_ref()),
                });
            }
        }
    }
    for want in desired {
        match find(observed, &want.resource, &want.object.name_any()) {
            None => changes.create.push(want),
            Some(have) if want.policy == SyncPolicy::Sync && !matches(&want.object, have) => {
                changes.patch.push(want);
            }
            Some(_) => {}
        }
    }
    changes
}

/// Whether every label, annotation and content field of `want` has the same value in `have`.
fn matches(want: &DynamicObject, have: &DynamicObject) -> bool {
    let pairs_in = |want: &std::collections::BTreeMap<String, String>,
                    have: &std::collections::BTreeMap<String, String>| {
        want.iter().all(|(k, v)| have.get(k) == Some(v))
    };
    pairs_in(want.labels(), have.labels())
        && pairs_in(want.annotations(), have.annotations())
        && is_subset(&want.data, &have.data)
}

/// `want` is contained in `have`: objects key by key, arrays element by element (same length),
/// everything else equal. A wanted `null` matches an absent field.
pub fn is_subset(want: &Value, have: &Value) -> bool {
    match (want, have) {
        (Value::Object(w), Value::Object(h)) => w
            .iter()
            .all(|(k, v)| h.get(k).map_or(v.is_null(), |hv| is_subset(v, hv))),
        (Value::Array(w), Value::Array(h)) => {
            w.len() == h.len() && w.iter().zip(h).all(|(a, b)| is_subset(a, b))
        }
        _ => want == have,
    }
}

/// The merge patch that brings an object in line with `want`: its labels, annotations and
/// content fields.
pub fn merge_patch(want: &DynamicObject) -> Value {
    let mut patch = want.data.clone();
    if let Value::Object(map) = &mut patch {
        map.insert(
            "metadata".to_owned(),
            serde_json::json!({
                "labels": want.labels(),
                "annotations": want.annotations(),
            }),
        );
    }
    patch
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config_map() -> ApiResource {
        ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&())
    }

    fn secret() -> ApiResource {
        ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&())
    }

    fn object(resource: &ApiResource, name: &str, data: Value) -> DynamicObject {
        let mut o = DynamicObject::new(name, resource).data(data);
        o.metadata.uid = Some(format!("uid-{name}"));
        o
    }

    fn want(resource: &ApiResource, name: &str, data: Value, policy: SyncPolicy) -> DesiredObject {
        DesiredObject::new(resource, DynamicObject::new(name, resource).data(data), policy)
    }

    #[test]
    fn subset_compares_only_wanted_fields() {
        let have = json!({"spec": {"a": 1, "b": [1, {"x": 1, "y": 2}], "defaulted": true}});
        assert!(is_subset(&json!({"spec": {"a": 1, "b": [1, {"x": 1}]}}), &have));
        assert!(!is_subset(&json!({"spec": {"a": 2}}), &have));
        assert!(!is_subset(&json!({"spec": {"b": [1]}}), &have));
        assert!(!is_subset(&json!({"spec": {"c": 1}}), &have));
        assert!(is_subset(&json!({"spec": {"c": null}}), &have));
    }

    #[test]
    fn missing_is_created_changed_is_patched_unwanted_is_deleted() {
        let cm = config_map();
        let observed = vec![
            Arc::new(object(&cm, "j-config", json!({"data": {"hostfile": "old"}}))),
            Arc::new(object(&cm, "j-stale", json!({"data": {}}))),
            Arc::new(object(&secret(), "j-ssh", json!({"data": {"k": "v"}}))),
        ];
        let desired = vec![
            want(
                &cm,
                "j-config",
                json!({"data": {"hostfile": "new"}}),
                SyncPolicy::Sync,
            ),
            want(
                &secret(),
                "j-ssh",
                json!({"data": {"k": "other"}}),
                SyncPolicy::CreateOnly,
            ),
            want(&cm, "j-new", json!({"data": {}}), SyncPolicy::Sync),
        ];
        let changes = diff(desired, &observed, &[cm.clone(), secret()]);
        let names = |v: &[DesiredObject]| v.iter().map(|d| d.object.name_any()).collect::<Vec<_>>();
        assert_eq!(names(&changes.create), ["j-new"]);
        assert_eq!(names(&changes.patch), ["j-config"]);
        assert_eq!(changes.delete.len(), 1);
        assert_eq!(changes.delete[0].child.name, "j-stale");
        assert_eq!(changes.delete[0].child.uid.as_deref(), Some("uid-j-stale"));
    }

    #[test]
    fn unchanged_objects_cost_nothing() {
        let cm = config_map();
        let mut have = object(&cm, "j-config", json!({"data": {"hostfile": "h"}}));
        have.metadata.labels = Some([("a".to_owned(), "b".to_owned())].into());
        let mut w = want(
            &cm,
            "j-config",
            json!({"data": {"hostfile": "h"}}),
            SyncPolicy::Sync,
        );
        w.object.metadata.labels = Some([("a".to_owned(), "b".to_owned())].into());
        let changes = diff(vec![w], &[Arc::new(have)], &[cm]);
        assert!(changes.create.is_empty() && changes.patch.is_empty() && changes.delete.is_empty());
    }

    #[test]
    fn unwatched_kinds_are_never_deleted() {
        let cm = config_map();
        let observed = vec![Arc::new(object(&secret(), "x", json!({})))];
        assert!(diff(Vec::new(), &observed, &[cm]).delete.is_empty());
    }

    #[test]
    fn merge_patch_carries_metadata_and_content() {
        let cm = config_map();
        let mut w = DynamicObject::new("n", &cm).data(json!({"data": {"k": "v"}}));
        w.metadata.labels = Some([("l".to_owned(), "1".to_owned())].into());
        assert_eq!(
            merge_patch(&w),
            json!({"data": {"k": "v"}, "metadata": {"labels": {"l": "1"}, "annotations": {}}})
        );
    }
}
