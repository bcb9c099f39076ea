//! What the caches keep of a watched object: only what reconciling reads. `managedFields` is a
//! third to nearly half of an object's JSON and a large tree once deserialized; a pod's and a
//! service's spec is never read back (the planner builds children from the job's templates and
//! reads only their metadata and status), so pods are cached as [`ObservedPod`] (no spec field)
//! and services come from a metadata-only watch. Of a pod's status, hooks and the planner see its phase,
//! reason, message, start time, conditions and each container's name, state, readiness and
//! restarts, not its addresses, images or resources. This bounds the operator's memory per live
//! job.
use k8s_openapi::api::core::v1::{ContainerStatus, PodStatus};
use kube::ResourceExt;
use kube::api::{ApiResource, DynamicObject, TypeMeta};

use crate::child_view::ObservedPod;

/// For every cached object: no `managedFields`.
pub fn slim<K: ResourceExt>(object: &mut K) {
    object.managed_fields_mut().clear();
}

/// A cached object of an owned kind, typed: a list response names `apiVersion` and `kind` once
/// for the list, not on each item, and the planner tells owned objects apart by their type. (An
/// untyped object listed after an operator restart or a relist looked missing: the planner tried
/// to create it again, and an MPIJob whose launcher Job finished meanwhile never succeeded.)
pub fn slim_owned(kind: &ApiResource) -> impl Fn(&mut DynamicObject) + use<> {
    let types = TypeMeta {
        api_version: kind.api_version.clone(),
        kind: kind.kind.clone(),
    };
    move |object| {
        slim(object);
        if object.types.is_none() {
            object.types = Some(types.clone());
        }
    }
}

/// A cached pod: metadata and the status a reconcile reads.
pub fn slim_pod(pod: &mut ObservedPod) {
    slim(pod);
    pod.status = pod.status.take().map(slim_pod_status);
}

fn slim_pod_status(status: PodStatus) -> PodStatus {
    let containers = |statuses: Option<Vec<ContainerStatus>>| {
        statuses.map(|all| all.into_iter().map(slim_container_status).collect())
    };
    PodStatus {
        phase: status.phase,
        reason: status.reason,
        message: status.message,
        start_time: status.start_time,
        // PodScheduled is dropped: no plan reads it, and a pod's binding would otherwise be a
        // change that reconciles its job for nothing (one per pod).
        conditions: status
            .conditions
            .map(|all| {
                all.into_iter()
                    .filter(|c| c.type_ != "PodScheduled")
                    .collect::<Vec<_>>()
            })
            .filter(|kept| !kept.is_empty()),
        container_statuses: containers(status.container_statuses),
        init_container_statuses: containers(status.init_container_statuses),
        ..PodStatus::default()
    }
}

fn slim_container_status(status: ContainerStatus) -> ContainerStatus {
    ContainerStatus {
        name: status.name,
        state: status.state,
        last_state: status.last_state,
        ready: status.ready,
        started: status.started,
        restart_count: status.restart_count,
        ..ContainerStatus::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_owned_objects_get_their_type() {
        let kind = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        let mut listed: DynamicObject =
            serde_json::from_value(serde_json::json!({ "metadata": { "name": "c" }, "data": {} })).unwrap();
        assert!(listed.types.is_none(), "a list item carries no type");
        slim_owned(&kind)(&mut listed);
        assert!(crate::plan::is_kind(&listed, &kind));
    }
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    #[test]
    fn cached_pods_keep_metadata_and_status_only() {
        let mut pod: ObservedPod = serde_json::from_value(serde_json::json!({
            "metadata": { "name": "p", "labels": { "a": "b" }, "managedFields": [{ "manager": "kfop" }] },
            "spec": { "containers": [{ "name": "main" }] },
            "status": {
                "phase": "Running", "podIP": "10.0.0.1", "qosClass": "BestEffort",
                "conditions": [{ "type": "Ready", "status": "True" }],
                "containerStatuses": [{
                    "name": "main", "image": "busybox", "imageID": "sha256:1", "ready": true,
                    "restartCount": 2, "state": { "running": {} },
                }],
            },
        }))
        .unwrap();
        slim_pod(&mut pod);
        assert_eq!(
            pod.metadata.managed_fields,
            Some(Vec::<ManagedFieldsEntry>::new())
        );
        assert_eq!(pod.labels()["a"], "b");
        let status = pod.status.unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert_eq!(status.conditions.unwrap()[0].type_, "Ready");
        assert!(status.pod_ip.is_none() && status.qos_class.is_none());
        let main = &status.container_statuses.unwrap()[0];
        assert_eq!(
            (main.name.as_str(), main.ready, main.restart_count),
            ("main", true, 2)
        );
        assert!(main.state.as_ref().unwrap().running.is_some());
        assert!(main.image.is_empty() && main.image_id.is_empty());
    }
}
