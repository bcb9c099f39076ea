//! MPIJob `kubeflow.org/v1` as training-operator v1.8.1 defines and runs it: the API ([`api`]),
//! and for a job created in it ([`created_as_v1`]) a bare launcher pod `<job>-launcher` that
//! reaches the workers with `kubectl exec` ([`pods`]), the `<job>-config` ConfigMap and the
//! launcher's ServiceAccount, Role and RoleBinding ([`objects`]), and a status the launcher pod
//! decides ([`status`]). A job created as `v2beta1` runs as mpi-operator runs it.
mod api;
pub mod objects;
pub mod pods;
pub mod status;

use kfop_runtime::api::{CleanPodPolicy, RestartPolicy};
use kfop_runtime::k8s_openapi::api::core::v1::PodTemplateSpec;
use kfop_runtime::kube::ResourceExt;
use kfop_runtime::{DesiredObject, Framework, FrameworkError, JobContext, PodContext, StatusUpdate};

pub use api::*;

/// The stored (v2beta1) type every job is read as, whatever version it was created in.
use crate::MPIJob as StoredMPIJob;
use crate::convert;

/// training-operator's `--mpi-kubectl-delivery-image` default.
pub const DEFAULT_KUBECTL_DELIVERY_IMAGE: &str = "kubeflow/kubectl-delivery:latest";

/// An MPIJob created as `kubeflow.org/v1`, run as training-operator v1.8.1 runs it.
#[derive(Debug, Clone)]
pub struct V1 {
    /// Image of the launcher's `kubectl-delivery` init container (training-operator's
    /// `--mpi-kubectl-delivery-image`).
    pub kubectl_delivery_image: String,
}

impl Default for V1 {
    fn default() -> Self {
        Self {
            kubectl_delivery_image: DEFAULT_KUBECTL_DELIVERY_IMAGE.to_owned(),
        }
    }
}

impl Framework for V1 {
    type Job = StoredMPIJob;

    fn decorate_pod(
        &self,
        ctx: &PodContext<'_, StoredMPIJob>,
        template: &mut PodTemplateSpec,
    ) -> Result<(), FrameworkError> {
        match ctx.role {
            "Launcher" => pods::decorate_launcher(ctx.job, template, &self.kubectl_delivery_image),
            _ => pods::decorate_worker(ctx.job, template),
        }
    }

    /// The launcher pod decides.
    fn update_status(&self, job: &StoredMPIJob, update: &mut StatusUpdate<'_>) {
        let _ = job;
        status::update_status(update);
    }

    /// The deprecated `spec.cleanPodPolicy` counts when `runPolicy` has none.
    fn clean_pod_policy(&self, job: &StoredMPIJob) -> CleanPodPolicy {
        job.spec
            .run_policy
            .clean_pod_policy
            .or_else(|| clean_pod_policy(job))
            .unwrap_or(CleanPodPolicy::None)
    }

    /// training-operator defaults the launcher to Never (mpi-operator's is OnFailure).
    fn default_restart_policy(&self, job: &StoredMPIJob, role: &str) -> Option<RestartPolicy> {
        let _ = job;
        (role == "Launcher").then_some(RestartPolicy::Never)
    }

    /// training-operator's owner references name the job `kubeflow.org/v1`.
    fn owner_api_version(&self, job: &StoredMPIJob) -> Option<String> {
        let _ = job;
        Some(api_version())
    }

    /// training-operator names its one launcher pod `<job>-launcher`.
    fn pod_name(&self, job: &StoredMPIJob, role: &str, index: i32) -> String {
        crate::hooks::launcher_or_child(job, role, index)
    }

    fn desired_objects(
        &self,
        ctx: &JobContext<'_, StoredMPIJob>,
    ) -> Result<Vec<DesiredObject>, FrameworkError> {
        objects::desired_objects(ctx)
    }
}

/// `kubeflow.org/v1`.
pub fn api_version() -> String {
    format!("{}/{}", convert::GROUP, convert::V1)
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
    use kfop_runtime::Framework;
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
        let mpi = crate::Mpi::default();
        let policy = |j: &crate::MPIJob| mpi.for_job(j).clean_pod_policy(j);
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
