//! MPIJob `kubeflow.org/v1` as training-operator v1.8.1 defines and runs it: the API ([`api`]),
//! and for a job created in it ([`created_as_v1`]) a bare launcher pod `<job>-launcher` that
//! reaches the workers with `kubectl exec` ([`pods`]), the `<job>-config` ConfigMap and the
//! launcher's ServiceAccount, Role and RoleBinding ([`objects`]), and a status the launcher pod
//! decides ([`status`]). A job created as `v2beta1` runs as mpi-operator runs it.
mod api;
pub mod objects;
pub mod pods;
pub mod status;

use std::sync::OnceLock;

use kfop_runtime::kube::ResourceExt;

pub use api::*;

use crate::convert;

/// training-operator's `--mpi-kubectl-delivery-image` default.
pub const DEFAULT_KUBECTL_DELIVERY_IMAGE: &str = "kubeflow/kubectl-delivery:latest";

static KUBECTL_DELIVERY_IMAGE: OnceLock<String> = OnceLock::new();

/// Sets the image of the launcher's `kubectl-delivery` init container for this process (the
/// operator's `--mpi-kubectl-delivery-image`); only the first call counts.
pub fn set_kubectl_delivery_image(image: String) {
    let _ = KUBECTL_DELIVERY_IMAGE.set(image);
}

/// The image of the launcher's `kubectl-delivery` init container.
pub fn kubectl_delivery_image() -> &'static str {
    KUBECTL_DELIVERY_IMAGE
        .get()
        .map_or(DEFAULT_KUBECTL_DELIVERY_IMAGE, String::as_str)
}

/// Whether `job` was created as `kubeflow.org/v1`, as the conversion webhook recorded it.
pub fn created_as_v1(job: &crate::MPIJob) -> bool {
    convert::created_as(Some(job.annotations())) == convert::V1
}

/// `spec.mainContainer` of a job created as v1 (kept in an annotation while stored).
pub fn main_container(job: &crate::MPIJob) -> Option<String> {
    convert::kept_field(job.annotations(), convert::V1, "mainContainer")?
        .as_str()
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
}

/// The deprecated top-level `spec.cleanPodPolicy` of a job created as v1.
pub fn clean_pod_policy(job: &crate::MPIJob) -> Option<kfop_runtime::api::CleanPodPolicy> {
    let value = convert::kept_field(job.annotations(), convert::V1, "cleanPodPolicy")?;
    kfop_runtime::serde_json::from_value(value).ok()
}

#[cfg(test)]
mod tests {
    use kfop_runtime::Hooks;
    use kfop_runtime::api::CleanPodPolicy;
    use kfop_runtime::serde_json::json;

    fn job(
        annotations: kfop_runtime::serde_json::Value,
        run_policy: kfop_runtime::serde_json::Value,
    ) -> crate::MPIJob {
        kfop_runtime::serde_json::from_value(json!({
            "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": {"name": "pi", "namespace": "ns", "annotations": annotations},
            "spec": {"runPolicy": run_policy, "mpiReplicaSpecs": {}},
        }))
        .unwrap()
    }

    #[test]
    fn a_v1_jobs_deprecated_clean_pod_policy_counts_when_run_policy_has_none() {
        let kept = json!({"kfop.dev/created-as": "v1", "kfop.dev/mpijob-v1-fields": "{\"cleanPodPolicy\":\"Running\"}"});
        let policy = |j: &crate::MPIJob| Hooks::clean_pod_policy(&crate::Mpi, j);
        assert_eq!(policy(&job(kept.clone(), json!({}))), CleanPodPolicy::Running);
        assert_eq!(
            policy(&job(kept, json!({"cleanPodPolicy": "All"}))),
            CleanPodPolicy::All
        );
        // A v2beta1 job keeps none of v1's fields in effect.
        let v2 = json!({"kfop.dev/mpijob-v1-fields": "{\"cleanPodPolicy\":\"Running\"}"});
        assert_eq!(policy(&job(v2, json!({}))), CleanPodPolicy::None);
    }
}
