//! One framework's controller: watch its jobs, observe children from the shared caches, plan,
//! apply. Built on `kube::runtime::Controller` (never the same job twice at once).
mod apply;
mod observe;
mod written;

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, ListParams};
use kube::runtime::controller::{Action, Config as RuntimeConfig, Controller};
use kube::runtime::events::Recorder;
use kube::runtime::reflector::{self, ObjectRef, Store, reflector};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};

pub use apply::apply;
pub use observe::{Deleted, observe};
pub use written::Written;

use crate::error::{Error, Result};
use crate::framework::Framework;
use crate::gang::GangScheduler;
use crate::metrics::{Metrics, ReconcileResult};
use crate::plan::Scheduling;
use crate::plan::plan;

/// Tuning of one controller.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// Jobs reconciled at once (Kubeflow: `--controller-threads`, default 1).
    pub concurrency: u16,
    /// Child creates and deletes in flight at once within one job (Kubeflow creates one by one, #2361).
    pub parallelism: usize,
    /// Emit an event per created or deleted pod and service, as Kubeflow does.
    pub child_events: bool,
    /// Watch only this namespace.
    pub namespace: Option<String>,
    /// Gang scheduling through Volcano or scheduler-plugins PodGroups (Kubeflow's
    /// `--gang-scheduler-name`).
    pub gang: GangScheduler,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            concurrency: 4,
            parallelism: 16,
            child_events: true,
            namespace: None,
            gang: GangScheduler::None,
        }
    }
}

/// Everything a reconcile of framework `F` needs.
pub struct Context<F: Framework> {
    pub client: Client,
    pub framework: Arc<F>,
    pub config: ControllerConfig,
    pub metrics: Arc<Metrics>,
    pub recorder: Recorder,
    pub pods: Store<Pod>,
    pub services: Store<Service>,
    /// Caches of the framework's other owned kinds ([`Framework::owned_kinds`]).
    pub objects: Vec<Store<DynamicObject>>,
    /// PriorityClasses, cached when gang scheduling is on.
    pub priority_classes: Option<Store<PriorityClass>>,
    pub deleted: Deleted,
    pub written: Written,
}

impl<F: Framework> std::fmt::Debug for Context<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("controller", &self.framework.info().controller_name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// A stale cached job (older than our own status write) is looked at again shortly.
const STALE_RETRY: Duration = Duration::from_millis(300);
/// Failed reconciles are retried after this long.
const ERROR_RETRY: Duration = Duration::from_secs(2);

async fn reconcile<F: Framework>(job: Arc<F::Job>, ctx: Arc<Context<F>>) -> Result<Action> {
    let mut timer = ctx.metrics.reconcile(&ctx.framework.info().controller_name);
    let uid = job.uid().unwrap_or_default();
    if ctx.written.is_stale(&uid, job.resource_version().as_deref()) {
        tracing::debug!(job = %job.name_any(), rv = ?job.resource_version(), "cached job older than our write");
        timer.set_result(ReconcileResult::Requeue);
        return Ok(Action::requeue(STALE_RETRY));
    }
    let scheduling = Scheduling {
        scheduler: ctx.config.gang.clone(),
        priority_classes: ctx
            .priority_classes
            .iter()
            .flat_map(Store::state)
            .map(|pc| (pc.name_any(), pc.value))
            .collect(),
    };
    let observed = observe(
        &uid,
        &ctx.pods,
        &ctx.services,
        &ctx.objects,
        scheduling,
        &ctx.deleted,
    );
    let now = Time(Timestamp::now());
    let planned = plan(ctx.framework.as_ref(), &job, &observed, &now);
    let result = match planned {
        Ok(plan) => {
            tracing::debug!(
                job = %job.name_any(),
                pods = observed.pods.len(),
                create_pods = plan.create_pods.len(),
                delete_pods = plan.delete_pods.len(),
                status = plan.status.is_some(),
                requeue = ?plan.requeue_after,
                "planned"
            );
            let requeue = plan.requeue_after;
            apply(&ctx, &job, plan)
                .await
                .map(|()| requeue.map_or_else(Action::await_change, Action::requeue))
        }
        Err(source) => Err(Error::Plan {
            job: format!("{}/{}", job.namespace().unwrap_or_default(), job.name_any()),
            source,
        }),
    };
    timer.set_result(match &result {
        Ok(_) => ReconcileResult::Success,
        Err(_) => ReconcileResult::Error,
    });
    result
}

fn error_policy<F: Framework>(job: Arc<F::Job>, error: &Error, _ctx: Arc<Context<F>>) -> Action {
    tracing::warn!(job = %job.name_any(), namespace = ?job.namespace(), %error, "reconcile failed");
    Action::requeue(ERROR_RETRY)
}

/// Fails with a hint when the framework's CRD is not installed.
pub async fn check_crd<F: Framework>(api: &Api<F::Job>) -> Result<()> {
    api.list(&ListParams::default().limit(1))
        .await
        .map(|_| ())
        .map_err(|source| Error::CrdMissing {
            kind: <F::Job as kube::Resource>::kind(&()).into_owned(),
            source,
        })
}

/// The job that controls `object`, if it is of kind `K`.
fn controlling_job<K: kube::Resource<DynamicType = ()>>(object: &DynamicObject) -> Option<ObjectRef<K>> {
    let (api_version, kind) = (K::api_version(&()), K::kind(&()));
    let owner = object
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true) && o.kind == kind && o.api_version == api_version)?;
    let reference = ObjectRef::new(&owner.name);
    Some(match &object.metadata.namespace {
        Some(ns) => reference.within(ns),
        None => reference,
    })
}

/// Runs the controller of `ctx.framework` until `shutdown` completes. `pod_events`,
/// `service_events` and `object_events` (one per owned kind) are subscriptions to the manager's
/// shared watches.
pub async fn run<F: Framework>(
    ctx: Arc<Context<F>>,
    pod_events: impl Stream<Item = Arc<Pod>> + Send + 'static,
    service_events: impl Stream<Item = Arc<Service>> + Send + 'static,
    object_events: Vec<futures::stream::BoxStream<'static, Arc<DynamicObject>>>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> Result<()> {
    let jobs: Api<F::Job> = match &ctx.config.namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
    check_crd::<F>(&jobs).await?;
    let name = ctx.framework.info().controller_name.clone();
    tracing::info!(controller = %name, "starting");
    let (reader, writer) = reflector::store();
    let job_events = reflector(
        writer,
        watcher(jobs, watcher::Config::default()).modify(crate::cache::slim::<F::Job>),
    )
    .applied_objects();
    let mut controller = Controller::for_stream(job_events, reader)
        .owns_shared_stream(pod_events)
        .owns_shared_stream(service_events);
    for events in object_events {
        let owners = events.filter_map(|o| std::future::ready(controlling_job::<F::Job>(&o)));
        controller = controller.reconcile_on(owners);
    }
    controller
        .with_config(RuntimeConfig::default().concurrency(ctx.config.concurrency))
        .graceful_shutdown_on(shutdown)
        .run(reconcile::<F>, error_policy::<F>, ctx)
        .for_each(|result| {
            if let Err(e) = result {
                tracing::debug!(controller = %name, error = %e, "controller event");
            }
            std::future::ready(())
        })
        .await;
    Ok(())
}
