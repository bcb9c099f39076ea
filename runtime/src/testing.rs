//! A minimal framework for tests: `TestJob` (group `test.kfop.dev`) with a master role `Master`
//! and a `Worker` role, container `main`, port `test-port`/7777.
use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::{JobStatus, ReplicaSpec, RestartPolicy, RunPolicy};
use crate::controller::ControllerConfig;
use crate::framework::{
    Framework, FrameworkInfo, FrameworkPort, JobName, LifecycleWording, Role, TrainingJob,
};
use crate::manager::{Manager, ManagerConfig};

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

impl Framework for TestFramework {
    type Job = TestJob;

    fn info(&self) -> &FrameworkInfo {
        &self.info
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
