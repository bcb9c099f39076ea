//! What the caches keep of a watched object: only what reconciling reads. `managedFields` is a
//! third to nearly half of an object's JSON and a large tree once deserialized; a pod's and a
//! service's spec is never read back (the planner builds children from the job's templates and
//! reads only their metadata and status). This bounds the operator's memory per live job.
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::ResourceExt;

/// For every cached object: no `managedFields`.
pub fn slim<K: ResourceExt>(object: &mut K) {
    object.managed_fields_mut().clear();
}

/// A cached pod: metadata and status.
pub fn slim_pod(pod: &mut Pod) {
    slim(pod);
    pod.spec = None;
}

/// A cached service: metadata.
pub fn slim_service(service: &mut Service) {
    slim(service);
    service.spec = None;
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    #[test]
    fn cached_pods_keep_metadata_and_status_only() {
        let mut pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": { "name": "p", "labels": { "a": "b" }, "managedFields": [{ "manager": "kfop" }] },
            "spec": { "containers": [{ "name": "main" }] },
            "status": { "phase": "Running" },
        }))
        .unwrap();
        slim_pod(&mut pod);
        assert_eq!(
            pod.metadata.managed_fields,
            Some(Vec::<ManagedFieldsEntry>::new())
        );
        assert!(pod.spec.is_none());
        assert_eq!(pod.labels()["a"], "b");
        assert_eq!(pod.status.unwrap().phase.as_deref(), Some("Running"));
    }
}
