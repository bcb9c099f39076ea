//! Carrying out a plan: thin and idempotent. A create that finds the object (409) and a delete
//! that finds nothing (404) or a newer object (409 on the UID precondition) are successes.
use std::sync::Arc;

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{ObjectReference, Pod, Service};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::{Context, NewChild};
use crate::error::{Error, Result};
use crate::packed::PackedJob;
use crate::plan::{ChildRef, DesiredObject, EventType, JobEvent, JobMetric, ObjectRef, Plan, merge_patch};

/// Applies `plan` to `job`: the children (in parallel) and, beside them, the status; then
/// events and metrics. The first error is returned after everything else was attempted, with
/// what the job as a status write returned it has left to do.
///
/// The status does not wait for the children: a restart's Restarting is written while its pod
/// is deleted, not after (the status says what the plan found, whatever its writes return, as
/// Kubeflow's does). What is left to do is planned once both are done, so that plan sees the
/// children this pass deleted and created.
pub async fn apply(ctx: &Context, job: &PackedJob, plan: Plan) -> (Result<()>, Option<Next>) {
    let ns = job.namespace().unwrap_or_default();
    let uid = job.uid().unwrap_or_default();
    let status = async {
        let status = plan.status.as_ref()?;
        let jobs: Api<PackedJob> = Api::all_with(ctx.client.clone(), ctx.framework.kind()).constrain(&ns);
        let patch = json!({ "status": status });
        Some(
            jobs.patch_status(&job.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
                .await,
        )
    };
    let ((mut events, mut first_error), written) =
        tokio::join!(apply_children(ctx, &ns, &uid, &plan), status);

    let mut status_stored = true;
    let mut next = None;
    match written {
        None => {}
        Some(Ok(updated)) => {
            // The job as written is planned here, not on the write's watch event: what is left
            // (a finished job's clean-up and TTL) is the reconcile's next step.
            let updated = Arc::new(updated);
            next = Some(match super::plan_job(ctx, &updated) {
                Ok(plan) if plan.has_work() => Next::Pass(updated.clone()),
                Ok(plan) => Next::Requeue(plan.requeue_after),
                Err(_) => Next::Pass(updated.clone()),
            });
            ctx.written.record(&uid, updated);
        }
        Some(Err(source)) => {
            status_stored = false;
            first_error.get_or_insert(Error::Kube {
                action: "patching the status of",
                kind: "job",
                name: job.name_any(),
                source,
            });
        }
    }

    if plan.delete_job {
        let jobs: Api<PackedJob> = Api::all_with(ctx.client.clone(), ctx.framework.kind()).constrain(&ns);
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
    publish(ctx, job, events).await;
    (first_error.map_or(Ok(()), Err), next)
}

/// The plan's child writes: pod deletes before creates (a replacement pod reuses the name of the
/// one it replaces), then owned objects, each phase in parallel. Records what was deleted and
/// created for the next plan; returns the writes' events and their first error.
async fn apply_children(ctx: &Context, ns: &str, uid: &str, plan: &Plan) -> (Vec<JobEvent>, Option<Error>) {
    let mut first_error: Option<Error> = None;
    let mut events: Vec<JobEvent> = Vec::new();
    let phases: [Vec<Change<'_>>; 4] = [
        plan.patch_pods
            .iter()
            .map(|(name, patch)| Change::PatchPod(name, patch))
            .collect(),
        plan.delete_pods
            .iter()
            .map(Change::DeletePod)
            .chain(plan.delete_services.iter().map(Change::DeleteService))
            .collect(),
        plan.create_pods
            .iter()
            .map(Change::CreatePod)
            .chain(plan.create_services.iter().map(Change::CreateService))
            .collect(),
        plan.delete_objects
            .iter()
            .map(Change::DeleteObject)
            .chain(plan.create_objects.iter().map(Change::CreateObject))
            .chain(plan.patch_objects.iter().map(Change::PatchObject))
            .collect(),
    ];
    for phase in phases {
        // Collected first: a lazy `map` over the changes would make the reconcile future's
        // `Send` proof generic over their lifetime, which rustc cannot show.
        let runs: Vec<_> = phase.into_iter().map(|change| change.run(ctx, ns)).collect();
        let outcomes: Vec<Outcome> = stream::iter(runs)
            .buffer_unordered(ctx.config.parallelism)
            .collect()
            .await;
        for outcome in outcomes {
            events.extend(outcome.events);
            if let Some(child_uid) = outcome.deleted {
                ctx.deleted.insert(uid, child_uid);
            }
            if let Some(child) = outcome.created {
                ctx.created.insert(uid, child);
            }
            if let Some(error) = outcome.error {
                first_error.get_or_insert(error);
            }
        }
    }
    (events, first_error)
}

/// What planning a job as its status write returned it found.
#[derive(Debug)]
pub enum Next {
    /// More to do: a pass over the job as written.
    Pass(Arc<PackedJob>),
    /// Nothing to do until then (a deadline, a TTL), if ever.
    Requeue(Option<std::time::Duration>),
}

/// One write of a plan.
#[derive(Clone, Copy)]
enum Change<'p> {
    PatchPod(&'p str, &'p serde_json::Value),
    DeletePod(&'p ChildRef),
    DeleteService(&'p ChildRef),
    CreatePod(&'p Pod),
    CreateService(&'p Service),
    DeleteObject(&'p ObjectRef),
    CreateObject(&'p DesiredObject),
    PatchObject(&'p DesiredObject),
}

/// What one change did: its events, the UID of a child it deleted (or found gone), the pod or
/// service it created, its error.
#[derive(Default)]
struct Outcome {
    events: Vec<JobEvent>,
    deleted: Option<String>,
    created: Option<NewChild>,
    error: Option<Error>,
}

impl Outcome {
    /// The resourceVersion of the pod or service this change created.
    fn created_version(&self) -> Option<&str> {
        match self.created.as_ref()? {
            NewChild::Pod(pod) => pod.metadata.resource_version.as_deref(),
            NewChild::Service(service) => service.metadata.resource_version.as_deref(),
        }
    }

    fn failed(error: Error) -> Self {
        Self {
            error: Some(error),
            ..Self::default()
        }
    }
}

/// The kind of Volcano's and scheduler-plugins' PodGroups alike.
const POD_GROUP: &str = "PodGroup";

impl Change<'_> {
    /// Carries the change out. Pods and services announce each create and delete (Kubeflow's
    /// `SuccessfulCreatePod` and friends); a PodGroup's deletion is announced as Kubeflow does
    /// (`JobTerminated`, then `SuccessfulDeletePodGroup` or `FailedDeletePodGroup`); other owned
    /// objects come and go without events.
    async fn run(self, ctx: &Context, ns: &str) -> Outcome {
        let client = ctx.client.clone();
        match self {
            Self::PatchPod(name, patch) => {
                // A pod gone or replaced (its UID in the patch differs) needs nothing more.
                let api = Api::<Pod>::namespaced(client, ns);
                match api
                    .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
                    .await
                {
                    Ok(_) => Outcome::default(),
                    Err(kube::Error::Api(status)) if matches!(status.code, 404 | 409 | 422) => {
                        Outcome::default()
                    }
                    Err(source) => object_failed(Error::Kube {
                        action: "patching",
                        kind: "pod",
                        name: name.to_owned(),
                        source,
                    }),
                }
            }
            Self::DeletePod(child) => {
                delete_child(&Api::<Pod>::namespaced(client, ns), child, "pod", ns).await
            }
            Self::DeleteService(child) => {
                delete_child(&Api::<Service>::namespaced(client, ns), child, "service", ns).await
            }
            Self::CreatePod(pod) => {
                let name = pod.name_any();
                ctx.pods.creating(Some(ns), &name);
                let outcome = create_child(&Api::namespaced(client, ns), pod, "pod", ns).await;
                ctx.pods.created(Some(ns), &name, outcome.created_version());
                outcome
            }
            Self::CreateService(service) => {
                let name = service.name_any();
                ctx.services.creating(Some(ns), &name);
                let outcome = create_child(&Api::namespaced(client, ns), service, "service", ns).await;
                ctx.services.created(Some(ns), &name, outcome.created_version());
                outcome
            }
            Self::DeleteObject(ObjectRef { resource, child }) => {
                let api: Api<DynamicObject> = Api::namespaced_with(client, ns, resource);
                let result = delete(&api, child).await;
                let name = format!("{}/{}", resource.kind, child.name);
                let mut events = Vec::new();
                if resource.kind == POD_GROUP {
                    events.push(child_event(
                        EventType::Normal,
                        "JobTerminated",
                        "Job has been terminated. Deleting PodGroup".to_owned(),
                        None,
                    ));
                    events.push(match &result {
                        Ok(_) => child_event(
                            EventType::Normal,
                            "SuccessfulDeletePodGroup",
                            format!("Deleted PodGroup: {}", child.name),
                            None,
                        ),
                        Err(source) => child_event(
                            EventType::Warning,
                            "FailedDeletePodGroup",
                            format!("Error deleting: {source}"),
                            None,
                        ),
                    });
                }
                match result {
                    Ok(_) => Outcome {
                        events,
                        deleted: child.uid.clone(),
                        ..Outcome::default()
                    },
                    Err(source) => Outcome {
                        events,
                        ..object_failed(Error::Kube {
                            action: "deleting",
                            kind: "owned object",
                            name,
                            source,
                        })
                    },
                }
            }
            Self::CreateObject(DesiredObject { resource, object, .. }) => {
                let api: Api<DynamicObject> = Api::namespaced_with(client, ns, resource);
                let mut object = object.clone();
                object.metadata.namespace = Some(ns.to_owned());
                let name = format!("{}/{}", resource.kind, object.name_any());
                if let Err(source) = ctx.framework.prepare_object(&mut object) {
                    return object_failed(Error::Prepare { object: name, source });
                }
                match create(&api, &object).await {
                    Ok(_) => Outcome::default(),
                    Err(source) => object_failed(Error::Kube {
                        action: "creating",
                        kind: "owned object",
                        name,
                        source,
                    }),
                }
            }
            Self::PatchObject(DesiredObject { resource, object, .. }) => {
                let api: Api<DynamicObject> = Api::namespaced_with(client, ns, resource);
                let name = object.name_any();
                let patch = Patch::Merge(merge_patch(object));
                match api.patch(&name, &PatchParams::default(), &patch).await {
                    Ok(_) => Outcome::default(),
                    Err(source) => object_failed(Error::Kube {
                        action: "patching",
                        kind: "owned object",
                        name: format!("{}/{name}", resource.kind),
                        source,
                    }),
                }
            }
        }
    }
}

/// An owned object's failure, logged: it has no event of its own.
fn object_failed(error: Error) -> Outcome {
    tracing::warn!(error = %error, "owned object not reconciled");
    Outcome::failed(error)
}

/// Deletes a pod or service, announcing it (`SuccessfulDeletePod`, `FailedDeleteService`, ...).
async fn delete_child<K>(api: &Api<K>, child: &ChildRef, kind: &'static str, ns: &str) -> Outcome
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let noun = capitalized(kind);
    match delete(api, child).await {
        Ok(deleted) => Outcome {
            events: deleted
                .then(|| {
                    child_event(
                        EventType::Normal,
                        &format!("SuccessfulDelete{noun}"),
                        format!("Deleted {kind}: {}", child.name),
                        related(kind, &child.name, ns),
                    )
                })
                .into_iter()
                .collect(),
            deleted: child.uid.clone(),
            ..Outcome::default()
        },
        Err(source) => Outcome {
            events: vec![child_event(
                EventType::Warning,
                &format!("FailedDelete{noun}"),
                format!("Error deleting: {source}"),
                related(kind, &child.name, ns),
            )],
            ..Outcome::failed(Error::Kube {
                action: "deleting",
                kind,
                name: child.name.clone(),
                source,
            })
        },
    }
}

/// Creates a pod or service, announcing it (`SuccessfulCreatePod`, `FailedCreateService`, ...).
async fn create_child<K>(api: &Api<K>, object: &K, kind: &'static str, ns: &str) -> Outcome
where
    K: crate::wire::Wire + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Into<NewChild>,
{
    let (noun, name) = (capitalized(kind), object.name_any());
    match crate::wire::create(api, object).await {
        Ok(created) => Outcome {
            events: created
                .is_some()
                .then(|| {
                    child_event(
                        EventType::Normal,
                        &format!("SuccessfulCreate{noun}"),
                        format!("Created {kind}: {name}"),
                        related(kind, &name, ns),
                    )
                })
                .into_iter()
                .collect(),
            created: created.map(Into::into),
            ..Outcome::default()
        },
        Err(source) => Outcome {
            events: vec![child_event(
                EventType::Warning,
                &format!("FailedCreate{noun}"),
                format!("Error creating: {source}"),
                related(kind, &name, ns),
            )],
            ..Outcome::failed(Error::Kube {
                action: "creating",
                kind,
                name,
                source,
            })
        },
    }
}

/// `pod` -> `Pod`, as Kubeflow's event reasons and object references spell the kind.
fn capitalized(kind: &str) -> String {
    let mut chars = kind.chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
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
        kind: Some(capitalized(kind)),
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        ..ObjectReference::default()
    })
}

/// Creates `obj`: the object the server stored, or `None` when it already existed.
async fn create<K>(api: &Api<K>, obj: &K) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.create(&PostParams::default(), obj).await {
        Ok(created) => Ok(Some(created)),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(None),
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

/// Hands the events to the process's event queue: they are informative, so a reconcile neither
/// waits for them to be created (one create each, the largest share of a job's API calls) nor
/// fails on them.
async fn publish(ctx: &Context, job: &PackedJob, events: Vec<JobEvent>) {
    let events: Vec<JobEvent> = events
        .into_iter()
        .filter(|e| ctx.config.child_events || !e.reason.starts_with("Successful"))
        .collect();
    if events.is_empty() {
        return;
    }
    let regarding = job.object_ref(ctx.framework.kind());
    ctx.events.publish(events, regarding).await;
}
