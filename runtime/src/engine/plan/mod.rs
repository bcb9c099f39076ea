//! The pure planner: `(framework, job, observed children, now) -> Plan`. No IO, no clock, no
//! randomness; every job policy is decided here and unit-tested.
mod build;
#[cfg(test)]
mod kueue_tests;
mod owned_objects;
mod replicas;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{Resource, ResourceExt};

pub use crate::api::{reason, set_condition};
pub use crate::framework::{
    DesiredObject, EventType, JobEvent, JobMetric, JobName, LifecycleWording, Observed, ObservedPod,
    ObservedService, RoleState, Scheduling, StatusUpdate, SyncPolicy, find, is_kind,
};
pub use crate::labels::owner_reference;
pub use build::{build_pod, build_service};
pub use owned_objects::{ObjectRef, is_subset, merge_patch};

use crate::api::{ConditionStatus, JobConditionType, JobStatus};
use crate::defaults::defaulted_specs;
use crate::framework::{Framework, FrameworkError, JobContext, JobPhase, Loaded, StatusOutput, TrainingJob};
use crate::gang::{self, JobRef, QuantityError};
use crate::policy;

/// A child to delete: its name, and its UID as a precondition so a newer object of the same name
/// is never deleted by mistake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildRef {
    pub name: String,
    pub uid: Option<String>,
}

impl ChildRef {
    fn of(meta: &impl ResourceExt) -> Self {
        Self {
            name: meta.name_any(),
            uid: meta.uid(),
        }
    }
}

/// Everything one reconcile should do.
#[derive(Debug, Default)]
pub struct Plan {
    pub create_pods: Vec<Pod>,
    pub create_services: Vec<Service>,
    pub delete_pods: Vec<ChildRef>,
    pub delete_services: Vec<ChildRef>,
    /// Strategic merge patches of pods (name, patch), applied before the deletes: a Kueue pod
    /// group's ([`gang::pod_patches`]).
    pub patch_pods: Vec<(String, serde_json::Value)>,
    /// Owned objects to create (then [`Framework::prepare_object`]), merge-patch or delete.
    pub create_objects: Vec<DesiredObject>,
    pub patch_objects: Vec<DesiredObject>,
    pub delete_objects: Vec<ObjectRef>,
    /// The new status, when it differs from the observed one.
    pub status: Option<JobStatus>,
    pub events: Vec<JobEvent>,
    pub metrics: Vec<JobMetric>,
    /// The TTL after finishing expired: delete the job.
    pub delete_job: bool,
    /// Reconcile again after this long even if nothing changes (deadline, TTL).
    pub requeue_after: Option<Duration>,
    /// Where the job stands, for the lifecycle metrics; not work.
    pub progress: Progress,
}

/// Where a job stands after a plan: what the lifecycle metrics time (creation to all pods
/// created, to Running, how long a hold lasted).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// No operator had reconciled the job before (its status had no Created condition), so its
    /// whole life is ahead of whoever planned this.
    pub first_pass: bool,
    /// Every pod the engine creates for the job's replicas exists (an MPIJob's launcher runs
    /// in a batch Job and is not one of them).
    pub pods_created: bool,
    /// Every one of those pods is Running (or has already succeeded).
    pub pods_running: bool,
    /// What holds the job back from running its pods, if anything.
    pub held: Option<Hold>,
    pub finished: bool,
}

/// What holds a job's pods back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hold {
    /// `runPolicy.suspend` (set by the user or a queue such as Kueue).
    Suspended,
    /// Gang scheduling: the PodGroup is missing from the cache or not admitted yet.
    Gang,
}

impl Plan {
    /// Whether applying this plan would change anything (a plan that only asks to be run again
    /// later changes nothing now).
    pub fn has_work(&self) -> bool {
        !(self.create_pods.is_empty()
            && self.create_services.is_empty()
            && self.delete_pods.is_empty()
            && self.delete_services.is_empty()
            && self.patch_pods.is_empty()
            && self.create_objects.is_empty()
            && self.patch_objects.is_empty()
            && self.delete_objects.is_empty()
            && self.events.is_empty()
            && self.metrics.is_empty())
            || self.status.is_some()
            || self.delete_job
    }

    /// The work this plan holds, counted per kind of change (for the resync's warning, to tell
    /// a lost event from a cache that lags its own writes).
    pub fn work(&self) -> String {
        let counts = [
            ("pod creates", self.create_pods.len()),
            ("service creates", self.create_services.len()),
            ("pod deletes", self.delete_pods.len()),
            ("service deletes", self.delete_services.len()),
            ("pod patches", self.patch_pods.len()),
            ("object creates", self.create_objects.len()),
            ("object patches", self.patch_objects.len()),
            ("object deletes", self.delete_objects.len()),
            ("events", self.events.len()),
            ("metrics", self.metrics.len()),
            ("status change", usize::from(self.status.is_some())),
            ("job delete", usize::from(self.delete_job)),
        ];
        let parts: Vec<String> = counts
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(what, n)| format!("{n} {what}"))
            .collect();
        parts.join(", ")
    }
}

/// Why a job could not be planned.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("framework hook failed: {0}")]
    Framework(#[from] FrameworkError),
    #[error("computing the PodGroup's minResources: {0}")]
    PodGroup(#[from] QuantityError),
}

/// Collects what a plan step decides, with the job's kind and name at hand for messages.
struct Draft<'a> {
    kind: &'a str,
    name: String,
    namespace: String,
    now: &'a Time,
    status: JobStatus,
    plan: Plan,
}

impl Draft<'_> {
    fn condition(
        &mut self,
        type_: JobConditionType,
        status: ConditionStatus,
        base: &str,
        message: String,
    ) -> bool {
        set_condition(
            &mut self.status,
            type_,
            status,
            reason(self.kind, base),
            message,
            self.now,
        )
    }

    fn event(&mut self, type_: EventType, reason: String, message: String) {
        self.plan.events.push(JobEvent {
            type_,
            reason,
            message,
            related: None,
        });
    }

    fn requeue(&mut self, after: Duration) {
        let current = self.plan.requeue_after.get_or_insert(after);
        *current = (*current).min(after);
    }

    /// Deletes the given pods and the services named like them (Kubeflow's
    /// `DeletePodsAndServices`), or every service when all pods go.
    fn clean(&mut self, pods: &[&ObservedPod], services: &[Arc<ObservedService>], all: bool) {
        // A pod already being deleted is not deleted again (its kubelet may be gone: a second
        // request would change nothing, on every pass).
        self.plan.delete_pods.extend(
            pods.iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .map(|p| ChildRef::of(*p)),
        );
        let names: Vec<String> = pods.iter().map(|p| p.name_any()).collect();
        // Only per-replica services: a framework's own service (MPI's) is an owned object.
        let per_replica = |s: &ObservedService| s.labels().contains_key(crate::labels::REPLICA_TYPE);
        self.plan.delete_services.extend(
            services
                .iter()
                .filter(|s| (all && per_replica(s)) || names.contains(&s.name_any()))
                .map(|s| ChildRef::of(s.as_ref())),
        );
    }

    /// Schedules deletion of the job once its TTL after finishing has passed.
    fn ttl(&mut self, run_policy: &crate::api::RunPolicy) {
        match policy::until_ttl_expiry(run_policy, self.status.completion_time.as_ref(), self.now) {
            Some(Duration::ZERO) => self.plan.delete_job = true,
            Some(left) => self.requeue(left),
            None => {}
        }
    }
}

/// Plans one reconcile of `job`.
pub fn plan<F: Framework>(
    framework: &Loaded<F>,
    job: &F::Job,
    observed: &Observed,
    now: &Time,
) -> Result<Plan, PlanError> {
    let job_type = framework.job_type();
    let kind = <F::Job as kube::Resource>::kind(job_type);
    let old = job.status().cloned().unwrap_or_default();
    let mut d = Draft {
        kind: &kind,
        name: job.name_any(),
        namespace: job.namespace().unwrap_or_default(),
        now,
        status: old.clone(),
        plan: Plan::default(),
    };
    if job.meta().deletion_timestamp.is_some() || !is_managed_here(job.run_policy()) {
        return Ok(d.plan);
    }
    let mut specs = defaulted_specs(framework.info(), job.replica_specs());
    for (role, spec) in &mut specs {
        // The spelling defaulting kept (the last of a role's spellings) decides whether it set one.
        let set = job
            .replica_specs()
            .iter()
            .rfind(|(key, _)| key.eq_ignore_ascii_case(role))
            .is_some_and(|(_, s)| s.restart_policy.is_some());
        if !set && let Some(policy) = framework.code_for(job).default_restart_policy(job, role) {
            spec.restart_policy = Some(policy);
        }
    }
    let phase = reconcile_job(framework, job, &specs, observed, &mut d)?;
    if observed.scheduling.kueue_group(job, specs.values()).is_some() {
        let finished = phase == JobPhase::Finished || d.status.is_finished();
        d.plan.patch_pods = gang::pod_patches(finished, observed.pods.iter().map(AsRef::as_ref));
    }
    let code = framework.code_for(job);
    let expected_pods = (specs.iter())
        .filter(|(role, _)| code.creates_pods(job, role))
        .fold(0i32, |sum, (_, spec)| sum.saturating_add(spec.replicas()));
    d.plan.progress = progress(&old, &d.status, observed, expected_pods, &d.name, phase);
    let ctx = JobContext {
        job,
        specs: &specs,
        observed,
        phase,
    };
    let mut desired = framework.desired_objects(&ctx)?;
    let mut kinds = framework.owned_kinds();
    let scheduler = &observed.scheduling.scheduler;
    if let Some(kind) = scheduler.pod_group_api_resource() {
        // A PodGroup lives while the job runs; finishing or suspending deletes it.
        if phase == JobPhase::Active {
            let mut job_ref = JobRef::of(job, job_type, &framework.info().controller_name);
            job_ref.owner = framework.owner_reference(job);
            let current = find(&observed.objects, &kind, &d.name);
            let priorities = &observed.scheduling.priority_classes;
            if let Some(group) =
                gang::desired_pod_group(scheduler, &job_ref, job.run_policy(), &specs, priorities, current)?
            {
                desired.push(DesiredObject::new(&kind, group, SyncPolicy::Sync));
            }
        }
        kinds.push(kind);
    }
    let changes = owned_objects::diff(desired, &observed.objects, &kinds);
    // A finished job creates nothing: an owned object gone missing (deleted by hand, or by a
    // namespace being deleted, which then refuses creates) stays gone, as its pods do.
    d.plan.create_objects = if phase == JobPhase::Finished {
        Vec::new()
    } else {
        changes.create
    };
    d.plan.patch_objects = changes.patch;
    d.plan.delete_objects = changes.delete;
    Ok(finish(d, &old))
}

fn progress(
    old: &JobStatus,
    new: &JobStatus,
    observed: &Observed,
    expected_pods: i32,
    job: &str,
    at: JobPhase,
) -> Progress {
    let live = observed
        .pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none());
    let (existing, running) = live.fold((0i32, 0i32), |(existing, running), pod| {
        let ran = matches!(phase(pod), "Running" | "Succeeded");
        (existing.saturating_add(1), running.saturating_add(i32::from(ran)))
    });
    let active = at == JobPhase::Active && expected_pods > 0;
    Progress {
        first_pass: old.condition(JobConditionType::Created).is_none(),
        pods_created: active && existing >= expected_pods,
        pods_running: active && running >= expected_pods,
        held: match at {
            JobPhase::Suspended => Some(Hold::Suspended),
            JobPhase::Active if gang_holds(observed, job) => Some(Hold::Gang),
            _ => None,
        },
        finished: at == JobPhase::Finished || new.is_finished(),
    }
}

/// Reconciles pods, services and conditions; returns where the job now is.
fn reconcile_job<F: Framework>(
    framework: &Loaded<F>,
    job: &F::Job,
    specs: &std::collections::BTreeMap<String, crate::api::ReplicaSpec>,
    observed: &Observed,
    d: &mut Draft<'_>,
) -> Result<JobPhase, PlanError> {
    let kind = d.kind.to_owned();
    let now = d.now;
    let run_policy = job.run_policy();
    let pods: Vec<&ObservedPod> = observed.pods.iter().map(AsRef::as_ref).collect();
    let code = framework.code_for(job);
    let clean_policy = code.clean_pod_policy(job);
    let wording = code.lifecycle_wording(
        job,
        JobName {
            kind: d.kind,
            name: &d.name,
            namespace: &d.namespace,
        },
    );

    if d.status.condition(JobConditionType::Created).is_none() {
        let msg = wording.created;
        if wording.created_event {
            d.event(EventType::Normal, reason(&kind, "Created"), msg.clone());
        }
        d.condition(JobConditionType::Created, ConditionStatus::True, "Created", msg);
        d.plan.metrics.push(JobMetric::Created);
    }

    if d.status.is_finished() {
        let clean = policy::pods_to_clean(clean_policy, true, &pods);
        let all = clean_policy == crate::api::CleanPodPolicy::All;
        d.clean(&clean, &observed.services, all);
        count_active_as_succeeded(&mut d.status);
        if code.deletes_job_after_ttl(job) {
            d.ttl(run_policy);
        }
        return Ok(JobPhase::Finished);
    }

    if run_policy.is_suspended() {
        d.clean(&pods, &observed.services, true);
        for rs in d.status.replica_statuses.values_mut() {
            rs.active = 0;
        }
        let mpi_style = wording.suspension_reports_every_role;
        if mpi_style {
            for role in specs.keys() {
                d.status.replica_statuses.entry(role.clone()).or_default();
            }
        }
        if !mpi_style && d.status.is(JobConditionType::Running) {
            d.condition(
                JobConditionType::Running,
                ConditionStatus::False,
                "Suspended",
                wording.running_suspended.clone(),
            );
        }
        if !d.status.is(JobConditionType::Suspended) {
            let msg = wording.suspended;
            d.condition(
                JobConditionType::Suspended,
                ConditionStatus::True,
                "Suspended",
                msg.clone(),
            );
            d.event(EventType::Normal, reason(&kind, "Suspended"), msg);
        }
        if mpi_style {
            d.condition(
                JobConditionType::Running,
                ConditionStatus::False,
                "Suspended",
                wording.running_suspended,
            );
        }
        return Ok(JobPhase::Suspended);
    }

    if d.status.is(JobConditionType::Suspended) {
        let msg = wording.resumed;
        d.condition(
            JobConditionType::Suspended,
            ConditionStatus::False,
            "Resumed",
            msg.clone(),
        );
        d.status.start_time = Some(now.clone());
        d.event(EventType::Normal, reason(&kind, "Resumed"), msg);
    }

    if let Some(message) = exceeded_limit(d, run_policy, specs, &pods) {
        d.status.completion_time.get_or_insert_with(|| now.clone());
        // Kubeflow deletes every pod here, ignoring cleanPodPolicy (#3419); kfop cleans as for
        // any finished job.
        let clean = policy::pods_to_clean(clean_policy, true, &pods);
        let all = clean_policy == crate::api::CleanPodPolicy::All;
        d.clean(&clean, &observed.services, all);
        d.event(EventType::Warning, reason(&kind, "Failed"), message.clone());
        if d.condition(JobConditionType::Failed, ConditionStatus::True, "Failed", message) {
            d.plan.metrics.push(JobMetric::Failed);
        }
        if code.deletes_job_after_ttl(job) {
            d.ttl(run_policy);
        }
        return Ok(JobPhase::Finished);
    }

    if gang_holds(observed, &d.name) {
        // Kubeflow's ReconcileJobs returns here: no pods, no services, no replica counts and no
        // startTime (so activeDeadlineSeconds does not count the wait). kfop watches the
        // PodGroup, so its admission triggers the next pass; lastReconcileTime is only stamped
        // once, where Kubeflow rewrites it on every pass to poll.
        d.status.last_reconcile_time.get_or_insert_with(|| now.clone());
        return Ok(JobPhase::Active);
    }
    let counts = replicas::reconcile(framework, job, specs, observed, d)?;
    warn_custom_scheduler(observed, specs, d);
    if !d.status.is(JobConditionType::Failed) {
        d.status.start_time.get_or_insert_with(|| now.clone());
        let name = JobName {
            kind: d.kind,
            name: &d.name,
            namespace: &d.namespace,
        };
        let out = StatusOutput {
            status: &mut d.status,
            events: &mut d.plan.events,
            metrics: &mut d.plan.metrics,
        };
        framework.update_status(
            job,
            &mut StatusUpdate::new(name, d.now, out, specs, &counts, observed),
        );
    }

    if !d.status.is_finished()
        && let Some(group) = observed.scheduling.kueue_group(job, specs.values())
    {
        kueue_waits(&group, observed, d);
    }

    let restarting = job
        .status()
        .and_then(|s| s.condition(JobConditionType::Restarting));
    left_terminating(&pods, restarting, d);
    if d.status.is_finished() {
        // The next pass cleans up and starts the TTL, as for any finished job. Its replica
        // counts are final now, so the finishing status is written once, not once as observed
        // and again as the next pass counts it.
        count_active_as_succeeded(&mut d.status);
        d.requeue(Duration::from_millis(200));
        return Ok(JobPhase::Finished);
    }
    if let Some(left) = policy::until_deadline(run_policy, d.status.start_time.as_ref(), now) {
        // Kubeflow's deadline only fires when something else triggers a reconcile (#3358).
        d.requeue(left);
    }
    Ok(JobPhase::Active)
}

/// How long past the end of its grace period a pod may still be terminating before its job says
/// it waits on it: a kubelet removes a pod within seconds of that end, so a pod still there is on
/// a node or kubelet that is gone, and stays until someone force-deletes it or the node returns.
pub const LEFT_TERMINATING_AFTER: Duration = Duration::from_secs(30);

/// A restarting job whose replacement pod waits for a pod that is still terminating
/// [`LEFT_TERMINATING_AFTER`] past its grace period says so: its Restarting condition takes the
/// reason `<Kind>RestartBlocked` and names the pod, with a Warning event when it first does. Until
/// then a pass is asked for at that moment. Pod names are fixed (Kubeflow's), so the replacement
/// cannot be created while the pod exists, and force-deleting a pod whose node may still run it
/// is the user's call, not the operator's: it could run the same rank twice.
fn left_terminating(pods: &[&ObservedPod], before: Option<&crate::api::JobCondition>, d: &mut Draft<'_>) {
    if !d.status.is(JobConditionType::Restarting) {
        return;
    }
    let now = d.now.0;
    let mut stuck = None;
    for pod in pods {
        let Some(gone_by) = pod.metadata.deletion_timestamp.as_ref() else {
            continue;
        };
        let wait = LEFT_TERMINATING_AFTER.as_secs_f64() - now.duration_since(gone_by.0).as_secs_f64();
        if wait > 0.0 {
            d.requeue(Duration::from_secs_f64(wait));
        } else if stuck.is_none() {
            stuck = Some((pod.name_any(), gone_by.0));
        }
    }
    let Some((pod, gone_by)) = stuck else {
        return;
    };
    let message = format!(
        "{} {} is restarting, but pod {pod} should have terminated by {gone_by} and has not: its \
         node or kubelet may be gone. Its replacement is created once it is removed (kubectl \
         delete pod {pod} --force).",
        d.kind, d.name
    );
    let base = "RestartBlocked";
    let said = before.is_some_and(|c| c.reason == reason(d.kind, base) && c.message == message);
    d.condition(
        JobConditionType::Restarting,
        ConditionStatus::True,
        base,
        message.clone(),
    );
    if !said {
        d.event(EventType::Warning, reason(d.kind, base), message);
    }
}

/// A succeeded job's replicas still running count as succeeded (Kubeflow's `ReconcileJobs`).
fn count_active_as_succeeded(status: &mut JobStatus) {
    if status.is(JobConditionType::Succeeded) {
        for rs in status.replica_statuses.values_mut() {
            rs.succeeded += rs.active;
            rs.active = 0;
        }
    }
}

/// Whether the gang scheduler holds the job back ([`gang::holds_pods`]): until the cache shows
/// its PodGroup, and under Volcano until the PodGroup is admitted.
fn gang_holds(observed: &Observed, job: &str) -> bool {
    let scheduler = &observed.scheduling.scheduler;
    scheduler
        .pod_group_api_resource()
        .is_some_and(|kind| gang::holds_pods(scheduler, find(&observed.objects, &kind, job)))
}

/// How often a job whose Kueue pod group waits is planned again, to refresh why it waits (Kueue's
/// Workload conditions do not trigger a reconcile; its pods being ungated does).
pub const KUEUE_WAIT_REFRESH: Duration = Duration::from_secs(10);

/// Under Kueue pod groups, a job whose group's Workload is not admitted (not yet, or no longer:
/// preempted) says so in its Running condition (False, reason `<Kind>WaitingForAdmission`) with
/// Kueue's own words for why; its pods exist but stay gated until Kueue admits the group.
fn kueue_waits(group: &gang::KueuePodGroup, observed: &Observed, d: &mut Draft<'_>) {
    let workload = observed.scheduling.kueue_workload.as_deref();
    if let gang::Admission::Waiting(why) = gang::admission(group, workload) {
        let message = format!(
            "{} {} waits for Kueue to admit its pods through LocalQueue {}: {why}",
            d.kind, d.name, group.queue
        );
        let reason = reason(d.kind, "WaitingForAdmission");
        // Kubeflow's conditions keep their message while status and reason stay; this one
        // follows Kueue's.
        let stale = d.status.conditions.iter_mut().find(|c| {
            c.type_ == JobConditionType::Running
                && c.status == ConditionStatus::False
                && c.reason == reason
                && c.message != message
        });
        if let Some(condition) = stale {
            condition.message = message;
            condition.last_update_time = Some(d.now.clone());
        } else {
            d.condition(
                JobConditionType::Running,
                ConditionStatus::False,
                "WaitingForAdmission",
                message,
            );
        }
        d.requeue(KUEUE_WAIT_REFRESH);
    }
}

/// Kubeflow's warning when gang scheduling is on and a template names another scheduler, on a
/// pass that creates pods.
fn warn_custom_scheduler(
    observed: &Observed,
    specs: &std::collections::BTreeMap<String, crate::api::ReplicaSpec>,
    d: &mut Draft<'_>,
) {
    let scheduler = &observed.scheduling.scheduler;
    if !d.plan.create_pods.is_empty() && gang::custom_scheduler_set(scheduler, specs) {
        d.event(
            EventType::Warning,
            gang::CUSTOM_SCHEDULER_REASON.to_owned(),
            gang::CUSTOM_SCHEDULER_MESSAGE.to_owned(),
        );
    }
}

/// The failure message if the backoff limit or the active deadline has been passed.
fn exceeded_limit(
    d: &Draft<'_>,
    run_policy: &crate::api::RunPolicy,
    specs: &std::collections::BTreeMap<String, crate::api::ReplicaSpec>,
    pods: &[&ObservedPod],
) -> Option<String> {
    let past_backoff = run_policy.backoff_limit.is_some_and(|limit| {
        let failed = pods.iter().filter(|p| phase(p) == "Failed").count();
        let previously_failed =
            (d.status.replica_statuses.values()).fold(0i32, |sum, r| sum.saturating_add(r.failed));
        let active = pods.iter().filter(|p| is_active(p)).count();
        let total = crate::api::ReplicaSpec::total(specs.values());
        // Kubeflow's `exceedsBackoffLimit` with its always-zero requeue count: only a limit of 0
        // fails on the first new pod failure.
        let new_failure = i32::try_from(failed).unwrap_or(i32::MAX) > previously_failed;
        let exceeds = new_failure && i32::try_from(active).ok() != Some(total) && limit <= 0;
        exceeds || policy::past_backoff_limit(limit, specs, |role| replicas::pods_of_role(pods, role))
    });
    if past_backoff {
        return Some(format!(
            "Job {} has failed because it has reached the specified backoff limit",
            d.name
        ));
    }
    policy::past_deadline(run_policy, d.status.start_time.as_ref(), d.now).then(|| {
        format!(
            "Job {} has failed because it was active longer than specified deadline",
            d.name
        )
    })
}

/// `runPolicy.managedBy` values that mean "this operator": unset, or Kubeflow's own controllers
/// (kfop replaces them). Any other value (e.g. `kueue.x-k8s.io/multikueue`) is left alone.
pub const MANAGED_BY_US: [&str; 2] = ["kubeflow.org/training-operator", "kubeflow.org/mpi-operator"];

pub fn is_managed_here(run_policy: &crate::api::RunPolicy) -> bool {
    run_policy
        .managed_by
        .as_deref()
        .is_none_or(|m| MANAGED_BY_US.contains(&m))
}

fn finish(mut d: Draft<'_>, old: &JobStatus) -> Plan {
    keep_unchanged_conditions(&mut d.status, old);
    if d.status != *old {
        d.plan.status = Some(d.status);
    }
    d.plan
}

/// A condition that ends a pass as it was stored keeps its stored times. Within one pass a
/// status function may set a condition and then its opposite (PyTorch's: Running for a running
/// Master, then Restarting for a Worker whose pod is terminating), and each setting stamps the
/// time: without this, every pass over the same pods wrote a new time, and each write's echo ran
/// the next pass, a write loop for as long as the pod took to go.
fn keep_unchanged_conditions(status: &mut JobStatus, old: &JobStatus) {
    for condition in &mut status.conditions {
        let stored = old.conditions.iter().find(|o| {
            o.type_ == condition.type_
                && o.status == condition.status
                && o.reason == condition.reason
                && o.message == condition.message
        });
        if let Some(stored) = stored {
            condition.last_update_time.clone_from(&stored.last_update_time);
            condition
                .last_transition_time
                .clone_from(&stored.last_transition_time);
        }
    }
}

pub(crate) fn phase(pod: &ObservedPod) -> &str {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}

/// Neither finished nor being deleted.
pub(crate) fn is_active(pod: &ObservedPod) -> bool {
    !matches!(phase(pod), "Succeeded" | "Failed") && pod.metadata.deletion_timestamp.is_none()
}
