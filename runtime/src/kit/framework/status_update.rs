//! What a framework's status hook sees and may change: the roles' states after this pass, and
//! the job's conditions, with the events and metrics their transitions record.
//! [`StatusUpdate::apply_policy`] is the default success and failure policy.
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::Observed;
use crate::api::{
    ConditionStatus, JobConditionType, JobStatus, ReplicaSpec, RestartPolicy, reason, set_condition,
};
use crate::cel_rule::{CelRule, Counts};
use crate::policy::SuccessPolicy;
use crate::status_rule::{CelStatus, RuleWording, StatusRule};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// An event about the job. Events come from transitions, never from re-observing a state.
#[derive(Debug, Clone, PartialEq)]
pub struct JobEvent {
    pub type_: EventType,
    pub reason: String,
    pub message: String,
    /// The child the event is about (a created or deleted pod or service), so events about
    /// different children are separate series, each with its own message.
    pub related: Option<k8s_openapi::api::core::v1::ObjectReference>,
}

/// A job-level counter to increment (Kubeflow's `training_operator_jobs_*_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobMetric {
    Created,
    Succeeded,
    Failed,
    Restarted,
}

/// What reconciling one role's pods found in this pass.
#[derive(Debug, Default, Clone)]
pub struct RoleCounts {
    pub replicas: i32,
    /// Indices whose pod succeeded with exit code 0 (TF's "worker 0 completed").
    pub succeeded_indices: BTreeSet<i32>,
    /// Failed pods of this role were replaced in this pass.
    pub restarted: bool,
}

/// The job a [`StatusUpdate`] is about.
#[derive(Debug, Clone, Copy)]
pub struct JobName<'a> {
    pub kind: &'a str,
    pub name: &'a str,
    pub namespace: &'a str,
}

/// One role's state after its pods were reconciled in this pass.
#[derive(Debug, Clone, Copy)]
pub struct RoleState<'a> {
    /// Desired replicas (defaulted).
    pub replicas: i32,
    pub active: i32,
    pub succeeded: i32,
    pub failed: i32,
    pub restart_policy: RestartPolicy,
    /// Indices whose pod succeeded with exit code 0 in the default container.
    pub completed_indices: &'a BTreeSet<i32>,
    /// Failed pods of this role were replaced in this pass (a Restarting condition was set).
    pub restarted: bool,
}

/// The job's status as a framework's status hook may change it: read role states, set
/// conditions. Each setter records the matching event, metric and completion time once, on the
/// transition.
#[derive(Debug)]
pub struct StatusUpdate<'a> {
    job: JobName<'a>,
    now: &'a Time,
    status: &'a mut JobStatus,
    events: &'a mut Vec<JobEvent>,
    metrics: &'a mut Vec<JobMetric>,
    specs: &'a BTreeMap<String, ReplicaSpec>,
    counts: &'a BTreeMap<String, RoleCounts>,
    observed: &'a Observed,
}

/// Where a [`StatusUpdate`] writes: the job's status and the events and metrics of this pass.
#[derive(Debug)]
pub struct StatusOutput<'a> {
    pub status: &'a mut JobStatus,
    pub events: &'a mut Vec<JobEvent>,
    pub metrics: &'a mut Vec<JobMetric>,
}

impl<'a> StatusUpdate<'a> {
    /// What the planner hands a status hook: `counts` are this pass's per-role findings.
    pub fn new(
        job: JobName<'a>,
        now: &'a Time,
        out: StatusOutput<'a>,
        specs: &'a BTreeMap<String, ReplicaSpec>,
        counts: &'a BTreeMap<String, RoleCounts>,
        observed: &'a Observed,
    ) -> Self {
        Self {
            job,
            now,
            status: out.status,
            events: out.events,
            metrics: out.metrics,
            specs,
            counts,
            observed,
        }
    }

    fn condition(
        &mut self,
        type_: JobConditionType,
        status: ConditionStatus,
        base: &str,
        message: String,
    ) -> bool {
        set_condition(
            self.status,
            type_,
            status,
            reason(self.job.kind, base),
            message,
            self.now,
        )
    }

    fn event(&mut self, type_: EventType, base: &str, message: String) {
        self.events.push(JobEvent {
            type_,
            reason: reason(self.job.kind, base),
            message,
            related: None,
        });
    }

    /// The job's children as this pass saw them, owned objects included.
    pub fn observed(&self) -> &Observed {
        self.observed
    }

    /// Overrides a role's replica counts, for a role whose pods the engine does not run itself
    /// (MPI's launcher, counted from its batch Job).
    pub fn set_replica_counts(&mut self, role: &str, active: i32, succeeded: i32, failed: i32) {
        let entry = self.status.replica_statuses.entry(role.to_owned()).or_default();
        entry.active = active;
        entry.succeeded = succeeded;
        entry.failed = failed;
    }

    pub fn kind(&self) -> &str {
        self.job.kind
    }

    pub fn name(&self) -> &str {
        self.job.name
    }

    pub fn namespace(&self) -> &str {
        self.job.namespace
    }

    /// Defaulted replica specs by canonical role name.
    pub fn specs(&self) -> &BTreeMap<String, ReplicaSpec> {
        self.specs
    }

    pub fn status(&self) -> &JobStatus {
        self.status
    }

    /// The state of `role`, if the job has that role.
    pub fn role(&self, role: &str) -> Option<RoleState<'_>> {
        let spec = self.specs.get(role)?;
        let counts = self.counts.get(role)?;
        let status = self.status.replica_statuses.get(role);
        Some(RoleState {
            replicas: spec.replicas(),
            active: status.map_or(0, |s| s.active),
            succeeded: status.map_or(0, |s| s.succeeded),
            failed: status.map_or(0, |s| s.failed),
            restart_policy: spec.restart_policy.unwrap_or(RestartPolicy::Never),
            completed_indices: &counts.succeeded_indices,
            restarted: counts.restarted,
        })
    }

    /// Whether any role's failed pods were replaced in this pass.
    pub fn restarted_any(&self) -> bool {
        self.counts.values().any(|c| c.restarted)
    }

    /// `Running=True` (no event, as in training-operator); true on the transition.
    pub fn set_running(&mut self, message: String) -> bool {
        self.condition(
            JobConditionType::Running,
            ConditionStatus::True,
            "Running",
            message,
        )
    }

    /// Records an event with reason `<Kind><base>` (e.g. mpi-operator's `MPIJobRunning`).
    pub fn announce(&mut self, type_: EventType, base: &str, message: String) {
        self.event(type_, base, message);
    }

    /// `Succeeded=True`, with completion time, a Normal event and the success metric.
    pub fn set_succeeded(&mut self, message: String) {
        if self.condition(
            JobConditionType::Succeeded,
            ConditionStatus::True,
            "Succeeded",
            message.clone(),
        ) {
            let now = self.now.clone();
            self.status.completion_time.get_or_insert(now);
            self.event(EventType::Normal, "Succeeded", message);
            self.metrics.push(JobMetric::Succeeded);
        }
    }

    /// `Failed=True`, with completion time, a Warning event and the failure metric.
    pub fn set_failed(&mut self, message: String) {
        if self.condition(
            JobConditionType::Failed,
            ConditionStatus::True,
            "Failed",
            message.clone(),
        ) {
            let now = self.now.clone();
            self.status.completion_time.get_or_insert(now);
            self.event(EventType::Warning, "Failed", message);
            self.metrics.push(JobMetric::Failed);
        }
    }

    /// `Failed=True` with reason `<Kind><base>` and, on the transition, a Warning event of that
    /// reason; no completion time and no metric. mpi-operator's verdict on evicted workers
    /// (`MPIJobEvicted`), which leaves its launcher Job running.
    pub fn set_failed_because(&mut self, base: &str, message: String) {
        if self.condition(
            JobConditionType::Failed,
            ConditionStatus::True,
            base,
            message.clone(),
        ) {
            self.event(EventType::Warning, base, message);
        }
    }

    /// `Restarting=True` with the restart metric on the transition, and a Warning event on every
    /// call: Kubeflow's status functions record it whenever they see a role restarting, also
    /// when the engine set the condition already in the same pass.
    pub fn set_restarting(&mut self, message: String) {
        if self.status.is(JobConditionType::Failed) {
            return;
        }
        if self.condition(
            JobConditionType::Restarting,
            ConditionStatus::True,
            "Restarting",
            message.clone(),
        ) {
            self.metrics.push(JobMetric::Restarted);
        }
        self.event(EventType::Warning, "Restarting", message);
    }

    /// Sets the conditions as a manifest's data rule says. [`StatusRule::Hook`] is the
    /// framework's code, which the caller runs: it changes nothing here.
    pub fn apply_rule(&mut self, rule: &StatusRule) {
        match rule {
            StatusRule::SuccessRules { rules, wording } => {
                let policy = SuccessPolicy::first_present(rules, self.specs);
                self.apply_policy_worded(&policy, wording);
            }
            StatusRule::LeaderOrFollowers { leader, followers } => {
                self.apply_leader_or_followers(leader.as_deref(), followers, false);
            }
            StatusRule::Cel(rule) => self.apply_expressions(rule),
            StatusRule::Hook => {}
        }
    }

    /// Kubeflow's PyTorchJob and PaddleJob status functions. With a `leader` role the leader
    /// decides: Running while it runs, Succeeded once all its replicas succeeded. Without one the
    /// `followers` do: Succeeded once all succeeded (or, with `any_follower_succeeds`, one),
    /// else Running while any runs. A role with failed pods and fewer running or succeeded pods
    /// than replicas restarts, or fails the job when its restartPolicy is Never.
    pub fn apply_leader_or_followers(
        &mut self,
        leader: Option<&str>,
        followers: &str,
        any_follower_succeeds: bool,
    ) {
        let (kind, ns, name) = (
            self.kind().to_owned(),
            self.namespace().to_owned(),
            self.name().to_owned(),
        );
        let leader = leader.filter(|l| self.specs.contains_key(*l));
        let has_leader = leader.is_some();
        for rtype in leader.into_iter().chain([followers]) {
            let Some(r) = self.role(rtype) else { continue };
            let (replicas, policy) = (r.replicas, r.restart_policy);
            let (expected, running, failed, succeeded) =
                (r.replicas - r.succeeded, r.active, r.failed, r.succeeded);
            if has_leader {
                if Some(rtype) == leader {
                    if running > 0 {
                        self.set_running(format!("{kind} {name} is running."));
                    }
                    if expected == 0 {
                        self.set_succeeded(format!("{kind} {name} is successfully completed."));
                        return;
                    }
                }
            } else if rtype == followers {
                if expected == 0 || (any_follower_succeeds && succeeded > 0) {
                    self.set_succeeded(format!("{kind} {ns}/{name} successfully completed."));
                } else if running > 0 {
                    self.set_running(format!("{kind} {ns}/{name} is running."));
                }
            }
            if failed > 0 && replicas > succeeded + running {
                if policy == RestartPolicy::Never {
                    self.set_failed(format!(
                        "{kind} {name} is failed because {failed} {rtype} replica(s) failed."
                    ));
                } else {
                    self.set_restarting(format!(
                        "{kind} {name} is restarting because {failed} {rtype} replica(s) failed."
                    ));
                }
            }
        }
    }

    /// What Kubeflow's XGBoostJob and MXJob status functions add to the default policy: a role
    /// whose failed pods were replaced under restartPolicy ExitCode announces the restart as
    /// `<subject> <name> is restarting because <n> <role> replica(s) failed.`
    fn announce_exit_code_restarts(&mut self, subject: &str) {
        let name = self.name().to_owned();
        let restarted: Vec<(String, i32)> = self
            .specs
            .keys()
            .filter_map(|role| {
                let r = self.role(role)?;
                (r.restarted && r.failed > 0 && r.restart_policy == RestartPolicy::ExitCode)
                    .then(|| (role.clone(), r.failed))
            })
            .collect();
        for (role, failed) in restarted {
            self.set_restarting(format!(
                "{subject} {name} is restarting because {failed} {role} replica(s) failed."
            ));
        }
    }

    /// The default policy: the deciding roles of `success` are Running while any of them is
    /// active and succeed per the rule; a failed replica of a role whose pods are not replaced
    /// (restartPolicy Never) fails the job. Success is checked first and ends the update.
    pub fn apply_policy(&mut self, success: &SuccessPolicy) {
        self.apply_policy_worded(success, &RuleWording::default());
    }

    /// [`Self::apply_policy`] worded as a manifest says (`spec.status.subject`, e.g. Kubeflow's
    /// MXJob writes `mxjob <name> is failed because ...`, and `exitCodeRestartEvents`).
    pub fn apply_policy_worded(&mut self, success: &SuccessPolicy, wording: &RuleWording) {
        let specs = self.specs;
        let deciding: Vec<&str> = success
            .roles(specs)
            .into_iter()
            .filter(|r| specs.contains_key(*r))
            .collect();
        let all_succeeded = |s: &Self, role: &str| s.role(role).is_some_and(|r| r.succeeded >= r.replicas);
        let succeeded = !deciding.is_empty()
            && match success {
                SuccessPolicy::AllOf(role) => all_succeeded(self, role),
                SuccessPolicy::AnyOf(role) => self.role(role).is_some_and(|r| r.succeeded > 0),
                SuccessPolicy::IndexZeroOf(role) => {
                    all_succeeded(self, role)
                        || self.role(role).is_some_and(|r| r.completed_indices.contains(&0))
                }
                SuccessPolicy::AllRoles => deciding.iter().all(|r| all_succeeded(self, r)),
            };
        let running = self.any_active(|role| deciding.contains(&role));
        self.conclude(succeeded, running, wording);
    }

    /// Whether a role the job has and `deciding` accepts has an active pod.
    fn any_active(&self, deciding: impl Fn(&str) -> bool) -> bool {
        self.specs
            .keys()
            .filter(|role| deciding(role))
            .any(|role| self.role(role).is_some_and(|r| r.active > 0))
    }

    /// What the manifest rules (`successRules`, `cel`) share once they know whether the job
    /// succeeded and whether it runs: Succeeded in Kubeflow's words; else Running while it runs
    /// (Restarting instead on a pass that replaced failed pods), and Failed once a role whose
    /// pods are not replaced (restartPolicy Never) has a failed one. Restarts under
    /// restartPolicy ExitCode are announced afterwards when the wording asks.
    fn conclude(&mut self, succeeded: bool, running: bool, wording: &RuleWording) {
        let subject = wording.subject.clone().unwrap_or_else(|| self.kind().to_owned());
        if succeeded {
            let (kind, name) = (self.kind(), self.name());
            self.set_succeeded(format!("{kind} {name} is successfully completed."));
        } else {
            self.apply_progress(running, &subject);
        }
        if wording.exit_code_restart_events {
            self.announce_exit_code_restarts(&subject);
        }
    }

    /// The job has not succeeded: Running while `running` and no failed pods were replaced in
    /// this pass, Failed on the first role (by name) with a failed pod that is not replaced.
    fn apply_progress(&mut self, running: bool, subject: &str) {
        let specs = self.specs;
        let (kind, name) = (self.kind().to_owned(), self.name().to_owned());
        // A pass that replaced failed pods reports Restarting, not Running.
        if running && !self.restarted_any() {
            self.set_running(format!("{kind} {name} is running."));
        }
        for role in specs.keys() {
            let Some(state) = self.role(role) else { continue };
            if state.failed > 0 && !state.restarted && state.restart_policy == RestartPolicy::Never {
                let failed = state.failed;
                self.set_failed(format!(
                    "{subject} {name} is failed because {failed} {role} replica(s) failed."
                ));
                return;
            }
        }
    }

    /// A manifest's `rule: cel`: Failed when the `failed` expression holds; else as the
    /// `successRules` rule does ([`Self::conclude`]), with the `succeeded` expression for its
    /// success and the `running` one for Running (without one: a role whose counts `succeeded`
    /// reads is active). An expression that cannot be evaluated (or did not compile) counts as
    /// false and is logged, once per update.
    pub fn apply_expressions(&mut self, rule: &CelStatus) {
        let counts = self.expression_counts();
        if let Some(failed) = &rule.failed
            && self.holds(failed, &counts, "failed")
        {
            let subject = rule.wording.subject.as_deref().unwrap_or(self.job.kind);
            let (name, source) = (self.name(), failed.source());
            let message = format!("{subject} {name} is failed because the failure rule `{source}` holds.");
            // Nothing to announce: a failed job does not restart.
            self.set_failed(message);
            return;
        }
        let succeeded = self.holds(&rule.succeeded, &counts, "succeeded");
        // Without a running rule, a role the success rule reads (every role, if it does not
        // compile) being active keeps the job running.
        let running = !succeeded
            && match &rule.running {
                Some(running) => self.holds(running, &counts, "running"),
                None => self.any_active(|role| rule.succeeded.roles_read().contains(role)),
            };
        self.conclude(succeeded, running, &rule.wording);
    }

    /// What `replicas` holds for an expression: the counts of every role the job has.
    fn expression_counts(&self) -> BTreeMap<String, Counts> {
        self.specs
            .keys()
            .filter_map(|role| {
                let r = self.role(role)?;
                let counts = Counts {
                    total: r.replicas,
                    active: r.active,
                    succeeded: r.succeeded,
                    failed: r.failed,
                };
                Some((role.clone(), counts))
            })
            .collect()
    }

    /// Whether `rule` (`spec.status.<field>`) holds; false, with a warning, when it cannot say.
    fn holds(&self, rule: &CelRule, counts: &BTreeMap<String, Counts>, field: &str) -> bool {
        rule.evaluate(counts).unwrap_or_else(|error| {
            tracing::warn!(
                job = %format_args!("{}/{}", self.namespace(), self.name()),
                kind = self.kind(),
                rule = rule.source(),
                %error,
                "spec.status.{field} counts as false"
            );
            false
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::api::ReplicaStatus;
    use crate::policy::SuccessPolicy;

    /// Runs `apply_expressions` on a job of 4 Workers (restartPolicy Never) with `status`'s
    /// counts, returning the status and the events.
    fn apply(status: ReplicaStatus, succeeded: &str, failed: Option<&str>) -> (JobStatus, Vec<JobEvent>) {
        let specs = BTreeMap::from([(
            "Worker".to_owned(),
            ReplicaSpec {
                replicas: Some(4),
                restart_policy: Some(RestartPolicy::Never),
                ..Default::default()
            },
        )]);
        let counts = BTreeMap::from([("Worker".to_owned(), RoleCounts::default())]);
        let mut job_status = JobStatus::default();
        job_status.replica_statuses.insert("Worker".to_owned(), status);
        let (mut events, mut metrics) = (Vec::new(), Vec::new());
        let now = Time(Timestamp::UNIX_EPOCH);
        let observed = Observed::default();
        let job = JobName {
            kind: "FooJob",
            name: "train",
            namespace: "ns",
        };
        let out = StatusOutput {
            status: &mut job_status,
            events: &mut events,
            metrics: &mut metrics,
        };
        let mut update = StatusUpdate::new(job, &now, out, &specs, &counts, &observed);
        update.apply_expressions(&CelStatus {
            succeeded: CelRule::deferred(succeeded),
            running: None,
            failed: failed.map(CelRule::deferred),
            wording: RuleWording::default(),
        });
        (job_status, events)
    }

    fn workers(active: i32, succeeded: i32, failed: i32) -> ReplicaStatus {
        ReplicaStatus {
            active,
            succeeded,
            failed,
            ..Default::default()
        }
    }

    const HALF: &str = "replicas.Worker.succeeded * 2 >= replicas.Worker.total";

    #[test]
    fn the_succeeded_expression_completes_the_job() {
        let (status, events) = apply(workers(2, 2, 0), HALF, None);
        let condition = status.condition(JobConditionType::Succeeded).unwrap();
        assert_eq!(condition.message, "FooJob train is successfully completed.");
        assert_eq!(condition.reason, "FooJobSucceeded");
        assert!(status.completion_time.is_some());
        assert_eq!(events[0].reason, "FooJobSucceeded");
    }

    #[test]
    fn until_it_holds_the_job_runs() {
        let (status, _) = apply(workers(3, 1, 0), HALF, None);
        assert!(status.is(JobConditionType::Running));
        assert!(!status.is_finished());
    }

    #[test]
    fn the_failed_expression_fails_the_job_first() {
        let (status, events) = apply(
            workers(2, 2, 0),
            HALF,
            Some("replicas.Worker.active < replicas.Worker.total"),
        );
        assert!(!status.is(JobConditionType::Succeeded));
        let condition = status.condition(JobConditionType::Failed).unwrap();
        assert_eq!(
            condition.message,
            "FooJob train is failed because the failure rule `replicas.Worker.active < replicas.Worker.total` holds."
        );
        assert_eq!(events[0].type_, EventType::Warning);
    }

    #[test]
    fn a_failed_pod_that_is_not_replaced_fails_the_job_as_under_the_other_rules() {
        let (status, _) = apply(workers(3, 0, 1), HALF, Some("replicas.Worker.failed > 2"));
        let condition = status.condition(JobConditionType::Failed).unwrap();
        assert_eq!(
            condition.message,
            "FooJob train is failed because 1 Worker replica(s) failed."
        );
    }

    #[test]
    fn an_expression_that_cannot_be_evaluated_is_false() {
        let (status, _) = apply(workers(1, 4, 0), "replicas.Worker.total / 0 == 1", None);
        assert!(!status.is_finished());
        let (status, _) = apply(workers(1, 4, 0), "replicas.Chief.succeeded > 0 ||", None);
        assert!(!status.is_finished());
    }

    /// A `success` list and a cel rule that says the same, worded alike.
    fn rules(
        success: &[&str],
        succeeded: &str,
        running: Option<&str>,
        subject: Option<&str>,
    ) -> (StatusRule, StatusRule) {
        let wording = RuleWording {
            subject: subject.map(str::to_owned),
            exit_code_restart_events: true,
        };
        let old = StatusRule::SuccessRules {
            rules: success
                .iter()
                .map(|r| SuccessPolicy::AllOf((*r).to_owned()))
                .collect(),
            wording: wording.clone(),
        };
        let new = StatusRule::Cel(CelStatus {
            succeeded: CelRule::deferred(succeeded),
            running: running.map(CelRule::deferred),
            failed: None,
            wording,
        });
        (old, new)
    }

    #[test]
    fn a_cel_rule_says_what_a_required_masters_success_rule_does() {
        // Running needs no expression: the roles `succeeded` reads decide it.
        let (old, new) = rules(
            &["Master"],
            "replicas.Master.succeeded >= replicas.Master.total",
            None,
            None,
        );
        let compared = crate::testing::compare_status_rules(
            "FooJob",
            &old,
            &new,
            &["Master", "Worker"],
            &["Master"],
            u64::MAX,
        );
        assert_eq!(compared, Ok(84 * 3 + 84 * 84 * 3));
    }

    #[test]
    fn a_cel_rule_says_what_the_first_role_present_deciding_does() {
        let (old, new) = rules(
            &["Scheduler", "Worker"],
            "has(replicas.Scheduler) ? replicas.Scheduler.succeeded >= replicas.Scheduler.total \
             : has(replicas.Worker) ? replicas.Worker.succeeded >= replicas.Worker.total \
             : size(replicas) > 0 && replicas.all(r, replicas[r].succeeded >= replicas[r].total)",
            Some(
                "has(replicas.Scheduler) ? replicas.Scheduler.active > 0 \
                 : has(replicas.Worker) ? replicas.Worker.active > 0 \
                 : replicas.exists(r, replicas[r].active > 0)",
            ),
            Some("foojob"),
        );
        let roles = ["Scheduler", "Server", "Worker"];
        // Every set of roles, each after 3 prior conditions: 3 states without any, 84 x 3 with
        // one, 10,000 sampled with two or three.
        let compared = crate::testing::compare_status_rules("FooJob", &old, &new, &roles, &[], 10_000);
        assert_eq!(compared, Ok(3 + 3 * 84 * 3 + 4 * 10_000));
        // Without `running`, every role would decide Running (`replicas.all` reads them all).
        let StatusRule::Cel(mut cel) = new else {
            panic!("{new:?}")
        };
        cel.running = None;
        let without_running = StatusRule::Cel(cel);
        let compared =
            crate::testing::compare_status_rules("FooJob", &old, &without_running, &roles, &[], 10_000);
        assert!(compared.is_err_and(|e| e.contains("is running.")));
    }

    #[test]
    fn running_defaults_to_the_roles_the_success_rule_reads() {
        let rule = |succeeded: &str| {
            StatusRule::Cel(CelStatus {
                succeeded: CelRule::deferred(succeeded),
                running: None,
                failed: None,
                wording: RuleWording::default(),
            })
        };
        let worker = crate::testing::RoleCase {
            replicas: 2,
            active: 2,
            succeeded: 0,
            failed: 0,
            restart_policy: RestartPolicy::Never,
            restarted: false,
        };
        let master = crate::testing::RoleCase { active: 0, ..worker };
        let roles = [("Master", Some(master)), ("Worker", Some(worker))];
        let running = |succeeded: &str| {
            let (status, ..) =
                crate::testing::run_status_rule(&rule(succeeded), "FooJob", &roles, &JobStatus::default());
            status.is(JobConditionType::Running)
        };
        assert!(!running("replicas.Master.succeeded == replicas.Master.total"));
        assert!(running("has(replicas.Master) && replicas.Worker.succeeded > 0"));
        assert!(running("replicas.all(r, replicas[r].succeeded > 0)"));
    }
}
