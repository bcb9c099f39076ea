//! Carrying out a plan: thin and idempotent. A create that finds the object (409) and a delete
//! that finds nothing (404) or a newer object (409 on the UID precondition) are successes.
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{ObjectReference, Pod, Service};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::Context;
use crate::error::{Error, Result};
use crate::framework::{Framework, TrainingJob};
use crate::plan::{ChildRef, DesiredObject, EventType, JobEvent, JobMetric, ObjectRef, Plan, merge_patch};

/// Applies `plan` to `job`. Children first (in parallel), then the status, then events and
/// metrics; the first error is returned after everything else was attempted.
pub async fn apply<F: Framework>(ctx: &Context<F>, job: &F::Job, plan: Plan) -> Result<()> {
    let ns = job.namespace().unwrap_or_default();
    let uid = job.uid().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), &ns);
    let mut first_error: Option<Error> = None;
    let mut events: Vec<JobEvent> = Vec::new();

    let deletes: Vec<_> = plan
        .delete_pods
        .iter()
        .map(|c| (c.clone(), POD))
        .chain(plan.delete_services.iter().map(|c| (c.clone(), SERVICE)))
        .map(|(child, kind): (ChildRef, &'static str)| {
            let (pods, services) = (pods.clone(), services.clone());
            async move {
                let result = match kind {
                    POD => delete(&pods, &child).await,
                    _ => delete(&services, &child).await,
                };
                (child, kind, result)
            }
        })
        .collect();
    let results: Vec<_> = stream::iter(deletes)
        .buffer_unordered(ctx.config.parallelism)
        .collect()
        .await;
    for (child, kind, result) in results {
        let (ok, failed) = if kind == POD {
            ("SuccessfulDeletePod", "FailedDeletePod")
        } else {
            ("SuccessfulDeleteService", "FailedDeleteService")
        };
        match result {
            Ok(deleted) => {
                if let Some(child_uid) = &child.uid {
                    ctx.deleted.insert(&uid, child_uid.clone());
                }
                if deleted {
                    events.push(child_event(
                        EventType::Normal,
                        ok,
                        format!("Deleted {kind}: {}", child.name),
                        related(kind, &child.name, &ns),
                    ));
                }
            }
            Err(source) => {
                events.push(child_event(
                    EventType::Warning,
                    failed,
                    format!("Error deleting: {source}"),
                    related(kind, &child.name, &ns),
                ));
                first_error.get_or_insert(Error::Kube {
                    action: "deleting",
                    kind,
                    name: child.name.clone(),
                    source,
                });
            }
        }
    }

    let creates: Vec<_> = plan
        .create_pods
        .iter()
        .map(|p| Child::Pod(Box::new(p.clone())))
        .chain(
            plan.create_services
                .iter()
                .map(|s| Child::Service(Box::new(s.clone()))),
        )
        .map(|child| {
            let (pods, services) = (pods.clone(), services.clone());
            async move {
                let result = match &child {
                    Child::Pod(pod) => create(&pods, pod).await,
                    Child::Service(svc) => create(&services, svc).await,
                };
                (child, result)
            }
        })
        .collect();
    let results: Vec<_> = stream::iter(creates)
        .buffer_unordered(ctx.config.parallelism)
        .collect()
        .await;
    for (child, result) in results {
        let (kind, name, ok, failed) = match &child {
            Child::Pod(p) => ("pod", p.name_any(), "SuccessfulCreatePod", "FailedCreatePod"),
            Child::Service(s) => (
                "service",
                s.name_any(),
                "SuccessfulCreateService",
                "FailedCreateService",
            ),
        };
        match result {
            Ok(true) => events.push(child_event(
                EventType::Normal,
                ok,
                format!("Created {kind}: {name}"),
                related(kind, &name, &ns),
            )),
            Ok(false) => {}
            Err(source) => {
                events.push(child_event(
                    EventType::Warning,
                    failed,
                    format!("Error creating: {source}"),
                    related(kind, &name, &ns),
                ));
                first_error.get_or_insert(Error::Kube {
                    action: "creating",
                    kind,
                    name,
                    source,
                });
            }
        }
    }

    if let Err(e) = apply_objects(ctx, &ns, &uid, &plan, &mut events).await {
        first_error.get_or_insert(e);
    }

    let mut status_stored = true;
    if let Some(status) = &plan.status {
        let jobs: Api<F::Job> = Api::namespaced(ctx.client.clone(), &ns);
        let patch = json!({ "status": status });
        match jobs
            .patch_status(&job.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(updated) => ctx.written.record(&uid, updated.resource_version().as_deref()),
            Err(source) => {
                status_stored = false;
                first_error.get_or_insert(Error::Kube {
                    action: "patching the status of",
                    kind: "job",
                    name: job.name_any(),
                    source,
                });
            }
        }
    }

    if plan.delete_job {
        let jobs: Api<F::Job> = Api::namespaced(ctx.client.clone(), &ns);
        let deleted = match jobs.delete(&job.name_any(), &DeleteParams::background()).await {
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            other => other.map(|_| ()),
        };
        match deleted {
            Ok(()) => {
                ctx.metrics.job_deleted(&ns, &ctx.framework.info().framework_name);
                events.push(child_event(
                    EventType::Normal,
                    "SuccessfulDeleteJob",
                    format!("Deleted job: {}", job.name_any()),
                    None,
                ));
            }
            Err(source) => {
                events.push(child_event(
                    EventType::Warning,
                    "FailedDeleteJob",
                    format!("Error deleting: {source}"),
                    None,
                ));
                first_error.get_or_insert(Error::Kube {
                    action: "deleting",
                    kind: "job",
                    name: job.name_any(),
                    source,
                });
            }
        }
    }

    // Job-level events and metrics only once the status that carries the transition is stored,
    // so a failed write does not count a transition that did not happen.
    if status_stored {
        let framework = &ctx.framework.info().framework_name;
        for metric in &plan.metrics {
            match metric {
                JobMetric::Created => ctx.metrics.job_created(&ns, framework),
                JobMetric::Succeeded => ctx.metrics.job_succeeded(&ns, framework),
                JobMetric::Failed => ctx.metrics.job_failed(&ns, framework),
                JobMetric::Restarted => ctx.metrics.job_restarted(&ns, framework),
            }
        }
        events.extend(plan.events);
    }
    publish(ctx, job, events);
    first_error.map_or(Ok(()), Err)
}

/// Deletes, creates (after [`Framework::prepare_object`]) and patches owned objects, in
/// parallel; returns the first error after trying everything. A PodGroup's deletion is
/// announced as Kubeflow does (`JobTerminated`, then `SuccessfulDeletePodGroup` or
/// `FailedDeletePodGroup`); other owned objects come and go without events.
async fn apply_objects<F: Framework>(
    ctx: &Context<F>,
    ns: &str,
    job_uid: &str,
    plan: &Plan,
    events: &mut Vec<JobEvent>,
) -> Result<()> {
    let api = |resource: &kube::api::ApiResource| -> Api<DynamicObject> {
        Api::namespaced_with(ctx.client.clone(), ns, resource)
    };
    type Op<'a> = futures::future::BoxFuture<'a, Result<Option<String>>>;
    let mut ops: Vec<Op<'_>> = Vec::new();
    let mut pod_groups = Vec::new();
    for ObjectRef { resource, child } in &plan.delete_objects {
        let api = api(resource);
        if resource.kind == POD_GROUP {
            pod_groups.push((api.clone(), child));
            continue;
        }
        ops.push(Box::pin(async move {
            delete(&api, child)
                .await
                .map(|_| child.uid.clone())
                .map_err(|source| Error::Kube {
                    action: "deleting",
                    kind: "owned object",
                    name: format!("{}/{}", resource.kind, child.name),
                    source,
                })
        }));
    }
    let mut first_error = None;
    for (api, child) in pod_groups {
        events.push(child_event(
            EventType::Normal,
            "JobTerminated",
            "Job has been terminated. Deleting PodGroup".to_owned(),
            None,
        ));
        match delete(&api, child).await {
            Ok(_) => {
                if let Some(uid) = &child.uid {
                    ctx.deleted.insert(job_uid, uid.clone());
                }
                events.push(child_event(
                    EventType::Normal,
                    "SuccessfulDeletePodGroup",
                    format!("Deleted PodGroup: {}", child.name),
                    None,
                ));
            }
            Err(source) => {
                events.push(child_event(
                    EventType::Warning,
                    "FailedDeletePodGroup",
                    format!("Error deleting: {source}"),
                    None,
                ));
                first_error.get_or_insert(Error::Kube {
                    action: "deleting",
                    kind: "owned object",
                    name: format!("{POD_GROUP}/{}", child.name),
                    source,
                });
            }
        }
    }
    for DesiredObject { resource, object, .. } in &plan.create_objects {
        let api = api(resource);
        ops.push(Box::pin(async move {
            let mut object = object.clone();
            object.metadata.namespace = Some(ns.to_owned());
            ctx.framework
                .prepare_object(&mut object)
                .map_err(|source| Error::Prepare {
                    object: format!("{}/{}", resource.kind, object.name_any()),
                    source,
                })?;
            create(&api, &object)
                .await
                .map(|_| None)
                .map_err(|source| Error::Kube {
                    action: "creating",
                    kind: "owned object",
                    name: format!("{}/{}", resource.kind, object.name_any()),
                    source,
                })
        }));
    }
    for DesiredObject { resource, object, .. } in &plan.patch_objects {
        let api = api(resource);
        ops.push(Box::pin(async move {
            let name = object.name_any();
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(&merge_patch(object)),
            )
            .await
            .map(|_| None)
            .map_err(|source| Error::Kube {
                action: "patching",
                kind: "owned object",
                name: format!("{}/{name}", resource.kind),
                source,
            })
        }));
    }
    // Deletes, creates and patches touch distinct objects, so they may run together.
    let results: Vec<Result<Option<String>>> = stream::iter(ops)
        .buffer_unordered(ctx.config.parallelism)
        .collect()
        .await;
    for result in results {
        match result {
            Ok(Some(deleted_uid)) => ctx.deleted.insert(job_uid, deleted_uid),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, "owned object not reconciled");
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

const POD: &str = "pod";
/// The kind of Volcano's and scheduler-plugins' PodGroups alike.
const POD_GROUP: &str = "PodGroup";
const SERVICE: &str = "service";

enum Child {
    Pod(Box<Pod>),
    Service(Box<Service>),
}

fn child_event(
    type_: EventType,
    reason: &str,
    message: String,
    related: Option<ObjectReference>,
) -> JobEvent {
    JobEvent {
        type_,
        reason: reason.to_owned(),
        message,
        related,
    }
}

/// A reference to the pod or service `name`.
fn related(kind: &str, name: &str, namespace: &str) -> Option<ObjectReference> {
    Some(ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some(if kind == POD { "Pod" } else { "Service" }.to_owned()),
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        ..ObjectReference::default()
    })
}

/// Creates `obj`; `Ok(false)` when it already exists.
async fn create<K>(api: &Api<K>, obj: &K) -> Result<bool, kube::Error>
where
    K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.create(&PostParams::default(), obj).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Deletes the child if it is still the object with its UID; `Ok(false)` when already gone.
async fn delete<K>(api: &Api<K>, child: &ChildRef) -> Result<bool, kube::Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let params = DeleteParams {
        preconditions: child.uid.clone().map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    match api.delete(&child.name, &params).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Records the events in the background, several at once: they are informative, so a reconcile
/// neither waits for them (one create each, the largest share of a job's API calls) nor fails
/// on them.
fn publish<J: TrainingJob>(ctx: &Context<impl Framework<Job = J>>, job: &J, events: Vec<JobEvent>) {
    let events: Vec<JobEvent> = events
        .into_iter()
        .filter(|e| ctx.config.child_events || !e.reason.starts_with("Successful"))
        .collect();
    if events.is_empty() {
        return;
    }
    let writer = ctx.events.clone();
    let regarding = job.object_ref(&());
    let parallelism = ctx.config.parallelism;
    tokio::spawn(async move {
        stream::iter(events)
            .for_each_concurrent(parallelism, |event| {
                let (writer, regarding) = (&writer, &regarding);
                async move {
                    if let Err(e) = writer.create(&event, regarding).await {
                        tracing::warn!(job = ?regarding.name, error = %e, "could not publish event");
                    }
                }
            })
            .await;
    });
}
