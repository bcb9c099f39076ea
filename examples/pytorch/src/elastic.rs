// Scaffolded by kfop 0.1.0. This file is yours: `kfop gen` never changes it.
//! The HorizontalPodAutoscaler of an elastic PyTorchJob (Kubeflow's `ReconcileHPA`): named after
//! the job, scaling its Worker replicas through the scale subresource between the elastic
//! policy's bounds on its metrics. It exists while the job runs; suspending deletes it.
use kfop_runtime::api::ReplicaSpec;
use kfop_runtime::k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kfop_runtime::kube::api::{ApiResource, DynamicObject};
use kfop_runtime::kube::{Resource, ResourceExt};
use kfop_runtime::labels::job_labels;
use kfop_runtime::plan::{DesiredObject, SyncPolicy, find, owner_reference};
use kfop_runtime::serde_json::json;
use kfop_runtime::{FrameworkError, JobContext, JobPhase, TrainingJob};

use crate::api::PyTorchJob;

pub fn desired_objects(ctx: &JobContext<'_, PyTorchJob>) -> Result<Vec<DesiredObject>, FrameworkError> {
    let job = ctx.job;
    let Some(elastic) = &job.spec.extra.elastic_policy else {
        return Ok(Vec::new());
    };
    let workers = ctx.specs.get("Worker").map(ReplicaSpec::replicas);
    let (Some(metrics), Some((min, max))) = (&elastic.metrics, elastic.bounds(workers)) else {
        return Ok(Vec::new());
    };
    let kind = ApiResource::erase::<HorizontalPodAutoscaler>(&());
    let name = job.name_any();
    let policy = match ctx.phase {
        JobPhase::Active => SyncPolicy::Sync,
        JobPhase::Suspended => return Ok(Vec::new()),
        // A finished job keeps its autoscaler until it is deleted, but never gets a new one.
        JobPhase::Finished if find(&ctx.observed.objects, &kind, &name).is_some() => SyncPolicy::CreateOnly,
        JobPhase::Finished => return Ok(Vec::new()),
    };
    let mut hpa = DynamicObject::new(&name, &kind).within(&job.namespace().unwrap_or_default());
    hpa.metadata.labels = Some(job_labels(&PyTorchJob::framework_info().controller_name, &name));
    hpa.metadata.owner_references = Some(vec![owner_reference(job, &())]);
    hpa.data = json!({ "spec": {
        "scaleTargetRef": {
            "apiVersion": PyTorchJob::api_version(&()),
            "kind": PyTorchJob::kind(&()),
            "name": name,
        },
        "minReplicas": min,
        "maxReplicas": max,
        "metrics": metrics,
    }});
    Ok(vec![DesiredObject::new(&kind, hpa, policy)])
}
