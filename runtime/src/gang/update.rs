//! Whether an observed PodGroup differs from the desired one, so the planner writes only on
//! change (Kubeflow compares a pointer with itself and so cannot tell; see the reference).
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::DynamicObject;
use serde::de::DeserializeOwned;

use super::podgroup::{
    SchedulerPluginsSpec, VolcanoSpec, scheduler_plugins_api_resource, volcano_api_resource,
};
use super::quantity::Amount;

/// The spec fields kfop owns, per PodGroup apiVersion; anything else in the spec (set by the
/// scheduler or a user) is left alone.
const VOLCANO_FIELDS: [&str; 4] = ["minMember", "queue", "priorityClassName", "minResources"];
const SCHEDULER_PLUGINS_FIELDS: [&str; 3] = ["minMember", "minResources", "scheduleTimeoutSeconds"];

/// Whether `observed` needs writing to match `desired`: an owned spec field differs (quantities
/// compared by value, so `1Gi` equals `1024Mi`; an absent field equals its empty value), or a
/// label of `desired` is missing (a PodGroup made by Kubeflow's operator lacks kfop's labels).
pub fn needs_update(observed: &DynamicObject, desired: &DynamicObject) -> bool {
    spec_differs(observed, desired) || labels_missing(observed, desired)
}

/// `observed` updated to `desired` (keeping its resourceVersion, other spec fields, labels and
/// annotations), or `None` when nothing differs.
pub fn pod_group_update(observed: &DynamicObject, desired: &DynamicObject) -> Option<DynamicObject> {
    if !needs_update(observed, desired) {
        return None;
    }
    let mut updated = observed.clone();
    let fields = owned_fields(desired).unwrap_or_default();
    let desired_spec = desired.data.get("spec").and_then(|s| s.as_object());
    if !updated.data.is_object() {
        updated.data = serde_json::json!({});
    }
    if let Some(data) = updated.data.as_object_mut() {
        let spec = data.entry("spec").or_insert_with(|| serde_json::json!({}));
        if !spec.is_object() {
            *spec = serde_json::json!({});
        }
        if let Some(spec) = spec.as_object_mut() {
            for field in fields {
                match desired_spec.and_then(|d| d.get(*field)) {
                    Some(value) => spec.insert((*field).to_owned(), value.clone()),
                    None => spec.remove(*field),
                };
            }
        }
    }
    if let Some(labels) = &desired.metadata.labels {
        updated
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .extend(labels.clone());
    }
    Some(updated)
}

fn owned_fields(pod_group: &DynamicObject) -> Option<&'static [&'static str]> {
    let api_version = pod_group.types.as_ref()?.api_version.as_str();
    if api_version == volcano_api_resource().api_version {
        Some(&VOLCANO_FIELDS)
    } else if api_version == scheduler_plugins_api_resource().api_version {
        Some(&SCHEDULER_PLUGINS_FIELDS)
    } else {
        None
    }
}

fn spec_differs(observed: &DynamicObject, desired: &DynamicObject) -> bool {
    let kind = |o: &DynamicObject| o.types.as_ref().map(|t| t.api_version.clone());
    if kind(observed) != kind(desired) {
        return true;
    }
    match owned_fields(desired) {
        Some(fields) if fields == VOLCANO_FIELDS => {
            match (spec::<VolcanoSpec>(observed), spec::<VolcanoSpec>(desired)) {
                (Some(o), Some(d)) => {
                    (o.min_member, &o.queue, &o.priority_class_name)
                        != (d.min_member, &d.queue, &d.priority_class_name)
                        || !same_resources(&o.min_resources, &d.min_resources)
                }
                _ => true,
            }
        }
        Some(_) => match (
            spec::<SchedulerPluginsSpec>(observed),
            spec::<SchedulerPluginsSpec>(desired),
        ) {
            (Some(o), Some(d)) => {
                (o.min_member, o.schedule_timeout_seconds) != (d.min_member, d.schedule_timeout_seconds)
                    || !same_resources(&o.min_resources, &d.min_resources)
            }
            _ => true,
        },
        None => observed.data.get("spec") != desired.data.get("spec"),
    }
}

/// The owned fields of a PodGroup's spec; `None` when they do not have the expected types.
fn spec<T: DeserializeOwned + Default>(pod_group: &DynamicObject) -> Option<T> {
    match pod_group.data.get("spec") {
        None | Some(serde_json::Value::Null) => Some(T::default()),
        Some(spec) => serde_json::from_value(spec.clone()).ok(),
    }
}

/// Equal by value; a quantity that does not parse equals only the same text.
fn same_resources(a: &BTreeMap<String, Quantity>, b: &BTreeMap<String, Quantity>) -> bool {
    a.len() == b.len()
        && a.iter().all(|(name, qa)| {
            b.get(name)
                .is_some_and(|qb| match (Amount::of(qa), Amount::of(qb)) {
                    (Ok(x), Ok(y)) => x.same_value(y),
                    _ => qa == qb,
                })
        })
}

fn labels_missing(observed: &DynamicObject, desired: &DynamicObject) -> bool {
    let have = observed.metadata.labels.as_ref();
    desired
        .metadata
        .labels
        .iter()
        .flatten()
        .any(|(k, v)| have.and_then(|h| h.get(k)) != Some(v))
}
