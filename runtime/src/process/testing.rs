//! A minimal framework for tests: `TestJob` (group `test.kfop.dev`) with a master role `Master`
//! and a `Worker` role, container `main`, port `test-port`/7777.
use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::{JobStatus, ReplicaSpec, RestartPolicy, RunPolicy};
use crate::controller::ControllerConfig;
use crate::framework::{
    Framework, FrameworkInfo, FrameworkPort, JobName, LifecycleWording, Loaded, Role, TrainingJob,
};
use crate::manager::{Manager, ManagerConfig};
use crate::manifest::Manifest;
use crate::status_rule::StatusRule;

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "test.kfop.dev",
    version = "v1",
    kind = "TestJob",
    namespaced,
    status = "JobStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct TestJobSpec {
    #[serde(default)]
    pub run_policy: RunPolicy,
    #[serde(default)]
    pub replica_specs: BTreeMap<String, ReplicaSpec>,
}

impl TrainingJob for TestJob {
    fn framework_info() -> &'static FrameworkInfo {
        static INFO: std::sync::LazyLock<FrameworkInfo> = std::sync::LazyLock::new(test_info);
        &INFO
    }

    fn replica_specs(&self) -> &BTreeMap<String, ReplicaSpec> {
        &self.spec.replica_specs
    }

    fn run_policy(&self) -> &RunPolicy {
        &self.spec.run_policy
    }

    fn status(&self) -> Option<&JobStatus> {
        self.status.as_ref()
    }
}

/// The test framework; its fields are public so tests can vary roles, defaults and wording.
#[derive(Debug, Clone)]
pub struct TestFramework {
    pub info: FrameworkInfo,
    pub lifecycle: fn(JobName<'_>) -> LifecycleWording,
    /// A per-job restart policy default for one role (the `default_restart_policy` hook).
    pub restart_default: Option<(&'static str, RestartPolicy)>,
}

impl Default for TestFramework {
    fn default() -> Self {
        Self {
            info: test_info(),
            lifecycle: LifecycleWording::training_operator,
            restart_default: None,
        }
    }
}

fn test_info() -> FrameworkInfo {
    FrameworkInfo {
        controller_name: "testjob-controller".to_owned(),
        framework_name: "test".to_owned(),
        default_container: "main".to_owned(),
        default_port: Some(FrameworkPort::new("test-port", 7777)),
        roles: vec![
            Role::new("Master", RestartPolicy::OnFailure).master(),
            Role::new("Worker", RestartPolicy::OnFailure),
        ],
    }
}

impl TestFramework {
    /// This framework with a manifest of its `info` whose status rule is its code's.
    pub fn loaded(self) -> Loaded<Self> {
        let kind = kube::api::ApiResource::erase::<TestJob>(&());
        Loaded::new(Manifest::of(self.info.clone(), kind, StatusRule::Hook), self)
    }
}

impl Framework for TestFramework {
    type Job = TestJob;

    /// The engine's old default: the master decides, or every role without one.
    fn update_status(&self, job: &Self::Job, update: &mut crate::plan::StatusUpdate<'_>) {
        let _ = job;
        let policy = crate::policy::SuccessPolicy::master_else_all(&self.info, update.specs());
        update.apply_policy(&policy);
    }

    fn lifecycle_wording(&self, job: &Self::Job, name: JobName<'_>) -> LifecycleWording {
        let _ = job;
        (self.lifecycle)(name)
    }

    fn default_restart_policy(&self, job: &Self::Job, role: &str) -> Option<RestartPolicy> {
        let _ = job;
        self.restart_default.filter(|(r, _)| *r == role).map(|(_, p)| p)
    }
}

/// A client for unit tests of code that builds requests but must not send any: every request
/// gets an empty 200 without leaving the process.
#[cfg(test)]
pub fn offline_client() -> kube::Client {
    let service = tower::service_fn(|_: http::Request<kube::client::Body>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(kube::client::Body::empty()))
    });
    kube::Client::new(service, "default")
}

/// A replica spec with `replicas` copies of a one-container pod named `main`.
pub fn replica(replicas: i32, restart_policy: Option<RestartPolicy>) -> ReplicaSpec {
    let template = serde_json::json!({ "spec": { "containers": [{ "name": "main", "image": "busybox" }] } });
    ReplicaSpec {
        replicas: Some(replicas),
        template: serde_json::from_value(template).unwrap_or_default(),
        restart_policy,
    }
}

/// A `TestJob` with the given roles, named `name` in namespace `ns`.
pub fn job(ns: &str, name: &str, roles: &[(&str, ReplicaSpec)]) -> TestJob {
    let mut job = TestJob::new(
        name,
        TestJobSpec {
            run_policy: RunPolicy::default(),
            replica_specs: roles.iter().map(|(r, s)| ((*r).to_owned(), s.clone())).collect(),
        },
    );
    job.metadata.namespace = Some(ns.to_owned());
    job
}

/// An operator running in the test's runtime, watching one namespace. Dropping it kills it.
#[derive(Debug)]
pub struct Operator {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<crate::Result<()>>>,
}

impl Operator {
    /// Starts a manager scoped to `namespace` with the frameworks `register` adds.
    pub fn start(client: kube::Client, namespace: &str, register: impl FnOnce(Manager) -> Manager) -> Self {
        Self::start_with(client, namespace, |_| {}, register)
    }

    /// [`Operator::start`] with the controller configuration changed by `configure` (e.g. gang
    /// scheduling on).
    pub fn start_with(
        client: kube::Client,
        namespace: &str,
        configure: impl FnOnce(&mut ControllerConfig),
        register: impl FnOnce(Manager) -> Manager,
    ) -> Self {
        // `RUST_LOG=kfop_runtime=debug` shows what the operator did when a test fails.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let mut controller = ControllerConfig {
            namespace: Some(namespace.to_owned()),
            ..ControllerConfig::default()
        };
        configure(&mut controller);
        let config = ManagerConfig {
            controller,
            reporter: "kfop-test".to_owned(),
            ..ManagerConfig::default()
        };
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(register(Manager::new(client, config)).run(async move {
            let _ = rx.await;
        }));
        Self {
            stop: Some(tx),
            task: Some(task),
        }
    }

    /// Kills the operator without a graceful stop, as a crash would.
    pub fn kill(self) {
        drop(self);
    }

    /// Stops gracefully and waits (at most 10 s) for the manager to finish.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(10), task).await;
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// One state of one role in [`compare_status_rules`]: its replicas, its pods' counts, its
/// restart policy and whether this pass replaced its failed pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoleCase {
    pub replicas: i32,
    pub active: i32,
    pub succeeded: i32,
    pub failed: i32,
    pub restart_policy: RestartPolicy,
    pub restarted: bool,
}

impl RoleCase {
    /// Every state a role takes in [`compare_status_rules`]: 1 or 2 replicas, at most that many
    /// pods active, succeeded and failed in all, under each restart policy, replaced or not.
    pub fn all() -> Vec<Self> {
        let mut cases = Vec::new();
        for replicas in 1..=2 {
            for (active, succeeded, failed) in counts_up_to(replicas) {
                for restart_policy in [
                    RestartPolicy::Never,
                    RestartPolicy::OnFailure,
                    RestartPolicy::ExitCode,
                ] {
                    for restarted in [false, true] {
                        cases.push(Self {
                            replicas,
                            active,
                            succeeded,
                            failed,
                            restart_policy,
                            restarted,
                        });
                    }
                }
            }
        }
        cases
    }
}

fn counts_up_to(total: i32) -> impl Iterator<Item = (i32, i32, i32)> {
    (0..=total)
        .flat_map(move |a| (0..=total - a).flat_map(move |s| (0..=total - a - s).map(move |f| (a, s, f))))
}

/// What one status update wrote: the status, the events and the metrics.
pub type StatusOutcome = (
    JobStatus,
    Vec<crate::framework::JobEvent>,
    Vec<crate::framework::JobMetric>,
);

/// Runs `rule` once on a `kind` job `train` in `ns` whose roles are in `roles` (`None`: the job
/// lacks it), after a pass that left `prior`.
pub fn run_status_rule(
    rule: &crate::StatusRule,
    kind: &str,
    roles: &[(&str, Option<RoleCase>)],
    prior: &JobStatus,
) -> StatusOutcome {
    use crate::api::ReplicaStatus;
    use crate::framework::{Observed, RoleCounts, StatusOutput};
    use crate::plan::StatusUpdate;

    let present = || {
        roles
            .iter()
            .filter_map(|(role, case)| Some(((*role).to_owned(), (*case)?)))
    };
    let specs: BTreeMap<String, ReplicaSpec> = present()
        .map(|(role, c)| (role, replica(c.replicas, Some(c.restart_policy))))
        .collect();
    let counts: BTreeMap<String, RoleCounts> = present()
        .map(|(role, c)| {
            let counts = RoleCounts {
                replicas: c.replicas,
                restarted: c.restarted,
                ..RoleCounts::default()
            };
            (role, counts)
        })
        .collect();
    let mut status = prior.clone();
    for (role, c) in present() {
        let replica_status = ReplicaStatus {
            active: c.active,
            succeeded: c.succeeded,
            failed: c.failed,
            ..ReplicaStatus::default()
        };
        status.replica_statuses.insert(role, replica_status);
    }
    let (mut events, mut metrics) = (Vec::new(), Vec::new());
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    let observed = Observed::default();
    let job = JobName {
        kind,
        name: "train",
        namespace: "ns",
    };
    let out = StatusOutput {
        status: &mut status,
        events: &mut events,
        metrics: &mut metrics,
    };
    StatusUpdate::new(job, &now, out, &specs, &counts, &observed).apply_rule(rule);
    (status, events, metrics)
}

/// Whether `old` and `new` write the same status, events and metrics for every job of `kind`
/// over `roles`: every set of them present (roles in `required` always are, as admission
/// requires), each present one in every [`RoleCase`], after a pass that left no condition,
/// Running or Restarting. A set of roles with more states than `limit` gets `limit` of them,
/// spread over all (a fixed stride), so that every role still varies. The number of states
/// compared, or the first difference.
pub fn compare_status_rules(
    kind: &str,
    old: &crate::StatusRule,
    new: &crate::StatusRule,
    roles: &[&str],
    required: &[&str],
    limit: u64,
) -> Result<u64, String> {
    use crate::api::{ConditionStatus, JobConditionType, reason, set_condition};

    let cases = RoleCase::all();
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    let mut priors = vec![JobStatus::default()];
    for (type_, base) in [
        (JobConditionType::Running, "Running"),
        (JobConditionType::Restarting, "Restarting"),
    ] {
        let mut prior = JobStatus::default();
        set_condition(
            &mut prior,
            type_,
            ConditionStatus::True,
            reason(kind, base),
            String::new(),
            &now,
        );
        priors.push(prior);
    }
    let mut compared = 0;
    for subset in 0..1u64 << roles.len() {
        let present = |i: usize| subset & (1 << i) != 0;
        if roles
            .iter()
            .enumerate()
            .any(|(i, r)| !present(i) && required.contains(r))
        {
            continue;
        }
        let varying = (0..roles.len()).filter(|i| present(*i)).count();
        let states = (cases.len() as u64).pow(varying as u32) * priors.len() as u64;
        let (count, stride) = if states <= limit {
            (states, 1)
        } else {
            // A stride coprime to the number of states visits distinct ones.
            let mut stride = states / limit;
            while gcd(stride, states) != 1 {
                stride += 1;
            }
            (limit, stride)
        };
        for i in 0..count {
            let mut index = i * stride % states;
            let prior = &priors[(index % priors.len() as u64) as usize];
            index /= priors.len() as u64;
            let mut job = Vec::with_capacity(roles.len());
            for (r, role) in roles.iter().enumerate() {
                let case = present(r).then(|| {
                    let case = cases[(index % cases.len() as u64) as usize];
                    index /= cases.len() as u64;
                    case
                });
                job.push((*role, case));
            }
            let (a, b) = (
                run_status_rule(old, kind, &job, prior),
                run_status_rule(new, kind, &job, prior),
            );
            if a != b {
                return Err(format!(
                    "the rules differ for {job:?} after {:?}:\nold: {a:#?}\nnew: {b:#?}",
                    prior.conditions
                ));
            }
        }
        compared += count;
    }
    Ok(compared)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}
