//! One framework's controller: watch its jobs, observe children from the shared caches, plan,
//! apply. Built on `kube::runtime::Controller` (never the same job twice at once).
mod apply;
mod events;
mod observe;
mod per_job;
mod planner;
mod resync;
mod triggers;
mod written;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, ListParams};
use kube::runtime::controller::{Action, Config as RuntimeConfig, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store, reflector};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};

pub use apply::{Next, apply};
pub use events::EventWriter;
pub use observe::{Created, Deleted, NewChild, observe};
pub use per_job::PerJob;
pub use planner::Planner;
pub use resync::{Activity, CACHE_GRACE, Overdue, QUEUE_BOUND};
pub use triggers::{Owner, Router, Trigger, Triggers};
pub use written::Written;

use triggers::coalesced;

use crate::child_index::{Children, NotSynced};
use crate::compact::{CachedPod, CachedService};
use crate::error::{Error, Result};
use crate::gang::GangScheduler;
use crate::metrics::{Metrics, Reaction, ReconcileResult};
use crate::packed::PackedJob;
use crate::plan::Scheduling;

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
    /// A job labelled `kueue.x-k8s.io/queue-name` runs its pods as one Kueue pod group (Kueue's
    /// "pod" integration) rather than waiting for Kueue to un-suspend it (`--kueue-pod-groups`).
    pub kueue_pod_groups: bool,
    /// Every live job is planned again this often, so a lost watch event delays a job by at most
    /// this long (controller-runtime's SyncPeriod).
    pub resync_period: Duration,
}

/// The default [`ControllerConfig::resync_period`].
pub const DEFAULT_RESYNC_PERIOD: Duration = Duration::from_secs(300);

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            concurrency: 4,
            parallelism: 16,
            child_events: true,
            namespace: None,
            gang: GangScheduler::None,
            kueue_pod_groups: false,
            resync_period: DEFAULT_RESYNC_PERIOD,
        }
    }
}

/// Everything a reconcile of one framework's jobs needs.
pub struct Context {
    pub client: Client,
    pub framework: Arc<dyn Planner>,
    pub config: ControllerConfig,
    pub metrics: Arc<Metrics>,
    pub events: EventWriter,
    pub pods: Children<CachedPod>,
    pub services: Children<CachedService>,
    /// Caches of the framework's other owned kinds ([`Framework::owned_kinds`]).
    pub objects: Vec<Children<DynamicObject>>,
    /// PriorityClasses, cached when gang scheduling is on.
    pub priority_classes: Option<Store<PriorityClass>>,
    /// Kueue's Workloads, cached when Kueue pod groups are on.
    pub kueue_workloads: Option<Store<DynamicObject>>,
    pub created: Created,
    pub deleted: Deleted,
    pub written: Written,
    pub activity: Activity,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("controller", &self.framework.info().controller_name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Context {
    /// Waits until every cache a plan reads has listed its objects once, starting the watches
    /// of owned kinds that wait for a first job. Without this, a reconcile right after a start
    /// would plan from empty caches: recreate what exists and report its pods missing.
    async fn synced(&self) -> std::result::Result<(), NotSynced> {
        self.pods.synced().await?;
        self.services.synced().await?;
        for objects in &self.objects {
            objects.synced().await?;
        }
        Ok(())
    }

    /// Whether [`Context::synced`] would return at once.
    fn is_synced(&self) -> bool {
        self.pods.is_synced() && self.services.is_synced() && self.objects.iter().all(Children::is_synced)
    }
}

/// Failed reconciles are retried after this long.
const ERROR_RETRY: Duration = Duration::from_secs(2);
/// A child's change reaches its job's reconcile this long after the first change of a burst, so
/// the pods of one job moving through Pending, Running and Succeeded together cost one reconcile
/// and one status write instead of one each (500 jobs: 9.0 -> 7.2 reconciles, 4.2 -> 3.5 status
/// writes per job). The job's own events are not delayed.
const CHILD_COALESCE: Duration = Duration::from_millis(250);
/// A child's change reaches its job's reconcile no sooner than this long after the job's last
/// reconcile started or was asked for, as Kubernetes' Job controller batches its pods' updates
/// (1 s): under load a job's pods change phase at moments a fraction of a second apart, and each
/// moment was a reconcile and a status write of intermediate replica counts. A change after a
/// quiet second still waits only [`CHILD_COALESCE`].
const CHILD_GAP: Duration = Duration::from_secs(1);

// Kubernetes 1.37's API made `value` optional (it defaults to 0).
k8s_openapi::k8s_if_ge_1_37! {
    fn priority_value(pc: &k8s_openapi::api::scheduling::v1::PriorityClass) -> i32 {
        pc.value.unwrap_or_default()
    }
}
k8s_openapi::k8s_if_le_1_36! {
    fn priority_value(pc: &k8s_openapi::api::scheduling::v1::PriorityClass) -> i32 {
        pc.value
    }
}

/// Plans `job` from the caches: the function both reconciles and resyncs run.
fn plan_job(ctx: &Context, job: &PackedJob) -> Result<crate::plan::Plan> {
    let scheduling = Scheduling {
        scheduler: ctx.config.gang.clone(),
        priority_classes: ctx
            .priority_classes
            .iter()
            .flat_map(Store::state)
            .map(|pc| (pc.name_any(), priority_value(&pc)))
            .collect(),
        kueue_pod_groups: ctx.config.kueue_pod_groups,
        kueue_workload: kueue_workload(ctx, job),
    };
    let uid = job.uid().unwrap_or_default();
    let observed = observe(
        &uid,
        &ctx.pods,
        &ctx.services,
        &ctx.objects,
        scheduling,
        &ctx.created,
        &ctx.deleted,
    );
    ctx.framework.plan(job, &observed, &Time(Timestamp::now()))
}

/// The Workload of `job`'s Kueue pod group, as the cache shows it (looked up by the group's name,
/// whether or not the job names a queue; the planner decides whether it has a group).
fn kueue_workload(ctx: &Context, job: &PackedJob) -> Option<Arc<DynamicObject>> {
    let store = ctx.kueue_workloads.as_ref()?;
    let name = crate::gang::group_name(&job.name_any(), &job.uid().unwrap_or_default());
    let key = ObjectRef::<DynamicObject>::new_with(&name, crate::gang::workload_api_resource())
        .within(&job.namespace().unwrap_or_default());
    store.get(&key)
}

#[tracing::instrument(
    name = "reconcile",
    skip_all,
    fields(
        kind = %ctx.framework.kind().kind,
        namespace = job.namespace().unwrap_or_default(),
        job = %job.name_any(),
    )
)]
async fn reconcile(job: Arc<PackedJob>, ctx: Arc<Context>) -> Result<Action> {
    let owner = Owner::of(job.as_ref());
    let started = Instant::now();
    if let Some(waited) = ctx.activity.started(&owner, started) {
        ctx.metrics
            .queue_waited(&ctx.framework.info().controller_name, waited);
    }
    let (result, requeue, reaction) = reconcile_once(job.as_ref(), &ctx).await;
    let now = Instant::now();
    if let (Some(failed), Some(reaction)) = (ctx.activity.take_failure(&owner, started), reaction) {
        ctx.metrics.failure_reaction(
            &ctx.framework.kind().kind,
            reaction,
            now.saturating_duration_since(failed),
        );
    }
    ctx.activity
        .finished(&owner, now, requeue.or(result.is_err().then_some(ERROR_RETRY)));
    result.map(|()| requeue.map_or_else(Action::await_change, Action::requeue))
}

/// One reconcile: the result, when to run again without a new event, and how it answered a
/// child's failure, if it did.
async fn reconcile_once(job: &PackedJob, ctx: &Context) -> (Result<()>, Option<Duration>, Option<Reaction>) {
    let mut timer = ctx.metrics.reconcile(&ctx.framework.info().controller_name);
    let uid = job.uid().unwrap_or_default();
    let written = ctx.written.newer_than(&uid, job.resource_version().as_deref());
    if let Some(written) = &written {
        tracing::debug!(cached = ?job.resource_version(), written = ?written.resource_version(), "planning from our write, which the cache does not show yet");
    }
    let job = written.as_deref().unwrap_or(job);
    if let Err(stopped) = ctx.synced().await {
        timer.set_result(ReconcileResult::Error);
        return (Err(stopped.into()), None, None);
    }
    let (mut result, mut next, mut reaction) = pass(ctx, job).await;
    // A status write that leaves the job more to do (a finished job's clean-up and TTL) is
    // followed by that pass now, from the job as written, rather than by its watch event.
    if let (Ok(()), Some(Next::Pass(written))) = (&result, &next) {
        let written = written.clone();
        let reacted = reaction;
        (result, next, reaction) = pass(ctx, &written).await;
        reaction = reacted.or(reaction);
    }
    let requeue = match next {
        Some(Next::Requeue(after)) => after,
        // Still more to do after two passes: another reconcile, at once.
        Some(Next::Pass(_)) => Some(Duration::ZERO),
        None => None,
    };
    timer.set_result(match &result {
        Ok(()) => ReconcileResult::Success,
        Err(_) => ReconcileResult::Error,
    });
    (result, requeue, reaction)
}

/// Plans `job` and applies the plan: the result, what comes next without a new event, and the
/// answer to a failure it wrote, if any.
async fn pass(ctx: &Context, job: &PackedJob) -> (Result<()>, Option<Next>, Option<Reaction>) {
    match plan_job(ctx, job) {
        Ok(plan) => {
            ctx.metrics
                .job_progress(&ctx.framework.kind().kind, job, plan.progress);
            tracing::debug!(
                create_pods = plan.create_pods.len(),
                delete_pods = plan.delete_pods.len(),
                create_objects = ?plan.create_objects.iter().map(|o| o.object.name_any()).collect::<Vec<_>>(),
                patch_objects = plan.patch_objects.len(),
                delete_objects = plan.delete_objects.len(),
                status = plan.status.is_some(),
                requeue = ?plan.requeue_after,
                "planned"
            );
            let requeue = plan.requeue_after;
            let reaction = Reaction::of(&plan);
            let (result, next) = apply(ctx, job, plan).await;
            let reaction = reaction.filter(|_| result.is_ok());
            // Without a status write, the plan says when to look again.
            (result, Some(next.unwrap_or(Next::Requeue(requeue))), reaction)
        }
        Err(error) => (Err(error), None, None),
    }
}

fn error_policy(job: Arc<PackedJob>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(job = %job.name_any(), namespace = ?job.namespace(), %error, "reconcile failed");
    Action::requeue(ERROR_RETRY)
}

/// Every `period`, plans each live job again and sends the ones with work left to `reconcile`;
/// forgets per-job state of jobs that are gone.
async fn resync(
    ctx: Arc<Context>,
    jobs: Store<PackedJob>,
    reconcile: futures::channel::mpsc::UnboundedSender<Owner>,
) {
    let started = Instant::now();
    let mut ticks = tokio::time::interval(ctx.config.resync_period.max(Duration::from_secs(1)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        resync_once(&ctx, &jobs, &reconcile, started);
    }
}

/// When this controller, running since `started`, could first have known `job`: the later of
/// its creation and the start.
fn known_since(job: &PackedJob, now: Instant, started: Instant) -> Instant {
    job.creation_timestamp()
        .and_then(|created| Duration::try_from(Timestamp::now().duration_since(created.0)).ok())
        .and_then(|age| now.checked_sub(age))
        .map_or(started, |created| created.max(started))
}

fn resync_once(
    ctx: &Context,
    jobs: &Store<PackedJob>,
    reconcile: &futures::channel::mpsc::UnboundedSender<Owner>,
    started: Instant,
) {
    let live = jobs.state();
    let uids: HashSet<String> = live.iter().filter_map(|j| j.uid()).collect();
    let owners: HashSet<Owner> = live.iter().map(|j| Owner::of(j.as_ref())).collect();
    ctx.written.retain(&uids);
    ctx.created.retain(&uids);
    ctx.deleted.retain(&uids);
    ctx.activity.retain(&owners);
    ctx.metrics.retain_jobs(&ctx.framework.kind().kind, &uids);
    // Gone jobs are forgotten either way. Caches that have not synced (or whose watch waits for
    // a first job) would show work that is not there; each job's reconcile waits for them.
    if !ctx.is_synced() {
        return;
    }
    let controller = &ctx.framework.info().controller_name;
    let mut pending = 0usize;
    for job in &live {
        if ctx
            .written
            .is_stale(&job.uid().unwrap_or_default(), job.resource_version().as_deref())
        {
            continue;
        }
        let work = match plan_job(ctx, job) {
            Ok(plan) if plan.has_work() => plan.work(),
            Ok(_) => continue,
            Err(e) => e.to_string(),
        };
        pending += 1;
        let owner = Owner::of(job.as_ref());
        let now = Instant::now();
        if let Some(cause) = ctx.activity.overdue(&owner, now, known_since(job, now, started)) {
            ctx.metrics.resync_found_work(controller, cause.label());
            tracing::warn!(
                %controller,
                namespace = owner.namespace.as_deref().unwrap_or_default(),
                job = %owner.name,
                %work,
                cause = cause.label(),
                "resync found work no event had triggered (a watch event or trigger was lost)"
            );
        }
        let _ = reconcile.unbounded_send(owner);
    }
    ctx.metrics.resynced(controller);
    tracing::debug!(%controller, jobs = live.len(), pending, "resynced");
}

/// Fails with a hint when the kind's CRD is not installed.
async fn check_crd(api: &Api<PackedJob>, kind: &str) -> Result<()> {
    match api.list(&ListParams::default().limit(1)).await {
        // Served, but a stored object does not convert yet (MPIJobs Kubeflow stored as v1, while
        // this process's conversion webhook starts): the watch retries until it does.
        Err(kube::Error::Api(status)) if status.code == 500 && status.reason == "StorageReadError" => Ok(()),
        listed => listed.map(|_| ()).map_err(|source| Error::CrdMissing {
            kind: kind.to_owned(),
            source,
        }),
    }
}

/// The reference the controller's queue uses for `owner`.
fn job_ref<K: kube::Resource>(owner: Owner, job_type: K::DynamicType) -> ObjectRef<K> {
    let reference = ObjectRef::new_with(&owner.name, job_type);
    match owner.namespace {
        Some(ns) => reference.within(&ns),
        None => reference,
    }
}

/// Runs the controller of `ctx.framework` until `shutdown` completes. `children` are the owners
/// of this framework's changed children, from the manager's shared watches.
pub async fn run(
    ctx: Arc<Context>,
    children: Triggers,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> Result<()> {
    let job_type = ctx.framework.kind().clone();
    let jobs: Api<PackedJob> = match &ctx.config.namespace {
        Some(ns) => Api::all_with(ctx.client.clone(), &job_type).constrain(ns),
        None => Api::all_with(ctx.client.clone(), &job_type),
    };
    check_crd(&jobs, &job_type.kind).await?;
    let name = ctx.framework.info().controller_name.clone();
    tracing::info!(controller = %name, "starting");
    ctx.metrics.controller_started(&name);
    let queued = Arc::downgrade(&ctx);
    ctx.metrics.queue(&name, move || {
        queued.upgrade().map_or(0, |ctx| ctx.activity.pending())
    });
    let writer = reflector::store::Writer::new(job_type.clone());
    let reader = writer.as_reader();
    let on_job = ctx.clone();
    let job_events = crate::relist::settled(
        reflector(
            writer,
            watcher(jobs, watcher::Config::default())
                .default_backoff()
                .modify(crate::cache::slim::<PackedJob>),
        ),
        reader.clone(),
    )
    .filter_map(move |job| std::future::ready(note_job_event(&on_job, job).map(Ok::<_, watcher::Error>)));
    let (resync_tx, resync_rx) = futures::channel::mpsc::unbounded();
    let (on_trigger, ran, on_failure) = (ctx.clone(), ctx.clone(), ctx.clone());
    let batched = triggers::failures_batched();
    let children = children.map(move |mut trigger| {
        if trigger.failure {
            on_failure.activity.failed(&trigger.owner, Instant::now());
            trigger.failure = !batched;
        }
        trigger
    });
    let triggers = futures::stream::select(
        coalesced(children, CHILD_COALESCE, CHILD_GAP, move |owner| {
            ran.activity.last_run(owner).map(tokio::time::Instant::from_std)
        }),
        resync_rx,
    )
    .map(move |owner| {
        on_trigger.activity.triggered(&owner, Instant::now());
        job_ref::<PackedJob>(owner, job_type.clone())
    });
    let resyncs = resync(ctx.clone(), reader.clone(), resync_tx);
    let controller = Controller::for_stream_with(job_events, reader, ctx.framework.kind().clone())
        .reconcile_on(triggers)
        .with_config(RuntimeConfig::default().concurrency(ctx.config.concurrency))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|result| {
            if let Err(e) = result {
                tracing::debug!(controller = %name, error = %e, "controller event");
            }
            std::future::ready(())
        });
    tokio::select! {
        () = controller => {},
        () = resyncs => {},
    }
    Ok(())
}

/// A present job is a trigger, returned to reconcile; a gone job's per-job state goes with it.
fn note_job_event(ctx: &Context, job: crate::relist::Settled<PackedJob>) -> Option<PackedJob> {
    if let crate::relist::Settled::Gone(gone) = &job {
        let uid = gone.uid().unwrap_or_default();
        ctx.written.forget(&uid);
        ctx.created.forget(&uid);
        ctx.deleted.forget(&uid);
        ctx.activity.forget(&Owner::of(gone));
        ctx.metrics.forget_job(&uid);
    }
    let job = job.present()?;
    if ctx
        .written
        .is_quiet_echo(&job.uid().unwrap_or_default(), job.resource_version().as_deref())
    {
        return None;
    }
    ctx.activity.triggered(&Owner::of(&job), Instant::now());
    Some(job)
}

#[cfg(test)]
mod tests {
    use futures::channel::mpsc::unbounded;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::testing::{TestFramework, TestJob, job, replica};

    /// A context whose client never reaches a server (a resync sends no request).
    fn context() -> Context {
        let client = crate::testing::offline_client();
        Context {
            client: client.clone(),
            framework: Arc::new(TestFramework::default().loaded()),
            config: ControllerConfig::default(),
            metrics: Arc::new(Metrics::new()),
            events: EventWriter::new(client, "test"),
            pods: listed_empty(),
            services: listed_empty(),
            objects: Vec::new(),
            priority_classes: None,
            kueue_workloads: None,
            created: Created::default(),
            deleted: Deleted::default(),
            written: Written::default(),
            activity: Activity::default(),
        }
    }

    /// An empty cache whose (dropped) watch has listed once: a synced, empty cluster.
    fn listed_empty<C: crate::child_index::Cached<DynamicType = ()>>() -> Children<C> {
        let mut writer = reflector::store::Writer::new(());
        writer.apply_watcher_event(&watcher::Event::InitDone);
        let cache = Children::new(writer.as_reader(), ());
        futures::FutureExt::now_or_never(cache.follow_store()).expect("the store has listed");
        cache
    }

    fn test_job(name: &str) -> TestJob {
        let mut j = job("ns", name, &[("Worker", replica(1, None))]);
        j.metadata.uid = Some(format!("uid-{name}"));
        j
    }

    /// `kfop_resync_found_work_total` of `cause`.
    fn found_work(ctx: &Context, cause: Overdue) -> u64 {
        let prefix = format!("cause=\"{}\"", cause.label());
        ctx.metrics
            .encode()
            .lines()
            .find(|l| l.starts_with("kfop_resync_found_work_total{") && l.contains(&prefix))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {prefix} in {}", ctx.metrics.encode()))
    }

    fn found(ctx: &Context) -> [u64; 3] {
        Overdue::ALL.map(|cause| found_work(ctx, cause))
    }

    #[tokio::test]
    async fn resync_sends_jobs_with_work_and_counts_only_overdue_ones() {
        let ctx = context();
        ctx.metrics.controller_started("testjob-controller");
        let mut writer = reflector::store::Writer::new(ctx.framework.kind().clone());
        let jobs = writer.as_reader();
        let mut leaving = test_job("leaving");
        leaving.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        for j in [test_job("fresh"), leaving] {
            writer.apply_watcher_event(&watcher::Event::Apply(PackedJob::pack(j).unwrap()));
        }
        let (tx, mut rx) = unbounded();
        let fresh = Owner::of(&test_job("fresh"));
        let now = Instant::now();
        let long_ago = now.checked_sub(QUEUE_BOUND * 2).unwrap();

        // Unknown to a controller that has just started: its watch event may be on its way.
        resync_once(&ctx, &jobs, &tx, now);
        assert_eq!(rx.try_recv().unwrap(), fresh);
        assert!(rx.try_recv().is_err(), "a job being deleted has nothing to do");
        assert_eq!(found(&ctx), [0, 0, 0]);

        // A controller running for long that never heard of the job: its watch event was lost.
        resync_once(&ctx, &jobs, &tx, long_ago);
        assert_eq!(rx.try_recv().unwrap(), fresh);
        assert_eq!(found(&ctx), [1, 0, 0], "never triggered");

        // Triggered long ago (the resync's own trigger counts), never reconciled: dropped.
        ctx.activity.forget(&fresh);
        ctx.activity.triggered(&fresh, long_ago);
        resync_once(&ctx, &jobs, &tx, long_ago);
        assert_eq!(found(&ctx), [1, 1, 0], "trigger dropped");

        // Reconciled long ago with nothing pending, yet work is left: an event was lost.
        let served = long_ago + Duration::from_secs(1);
        ctx.activity.started(&fresh, served);
        ctx.activity.finished(&fresh, served, None);
        resync_once(&ctx, &jobs, &tx, long_ago);
        assert_eq!(found(&ctx), [1, 1, 1], "lost event");
        while rx.try_recv().is_ok() {}

        // A gone job's state is dropped.
        let mut gone = test_job("gone");
        gone.metadata.resource_version = Some("7".into());
        ctx.written
            .record("uid-gone", Arc::new(PackedJob::pack(gone).unwrap()));
        ctx.activity
            .triggered(&Owner::of(&test_job("gone")), Instant::now());
        resync_once(&ctx, &jobs, &tx, now);
        assert!(ctx.written.is_empty());
        assert_eq!(ctx.activity.len(), 1);
    }

    #[tokio::test]
    async fn resync_waits_for_caches_a_reconcile_has_not_started() {
        let mut ctx = context();
        let kind = kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        let mut objects = reflector::store::Writer::<DynamicObject>::new(kind.clone());
        ctx.objects.push(Children::on_demand(objects.as_reader(), kind));
        let mut writer = reflector::store::Writer::new(ctx.framework.kind().clone());
        let jobs = writer.as_reader();
        writer.apply_watcher_event(&watcher::Event::Apply(
            PackedJob::pack(test_job("fresh")).unwrap(),
        ));
        let (tx, mut rx) = unbounded();

        // Planned now, the job would look as if it owned no ConfigMap and was owed one.
        resync_once(&ctx, &jobs, &tx, Instant::now());
        assert!(rx.try_recv().is_err(), "planned from a cache that never listed");
        assert!(!ctx.is_synced());

        // Its reconcile starts the watch and waits for the list; then resyncs plan again.
        let cache = ctx.objects[0].clone();
        let synced = tokio::spawn(async move { cache.synced().await });
        let cache = ctx.objects[0].clone();
        let follow = tokio::spawn(async move { cache.follow_store().await });
        tokio::task::yield_now().await;
        objects.apply_watcher_event(&watcher::Event::InitDone);
        follow.await.unwrap();
        synced.await.unwrap().unwrap();
        resync_once(&ctx, &jobs, &tx, Instant::now());
        assert_eq!(rx.try_recv().unwrap(), Owner::of(&test_job("fresh")));
    }
}
