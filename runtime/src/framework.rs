//! What a framework supplies: identity, roles, defaults, pod decoration and its success policy.
//! Everything but identity has a default, so a simple framework is mostly data.
use std::collections::BTreeMap;
use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::api::{JobStatus, ReplicaSpec, RestartPolicy, RunPolicy};
use crate::plan::{DesiredObject, Observed, StatusUpdate};
use crate::policy::SuccessPolicy;

/// A training-job custom resource: a spec with replica specs and a run policy, and a status.
/// `kfop-derive` implements it; hand-written types can too.
pub trait TrainingJob:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The static facts of this job kind: controller and framework names, roles, default
    /// container and port. `kfop-derive` generates it from the attribute.
    fn framework_info() -> &'static FrameworkInfo;

    /// The replica specs keyed by replica type, as the user wrote them.
    fn replica_specs(&self) -> &BTreeMap<String, ReplicaSpec>;
    fn run_policy(&self) -> &RunPolicy;
    fn status(&self) -> Option<&JobStatus>;
}

/// A replica type (role) a framework knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Role {
    /// Canonical CamelCase name, e.g. `Worker`; user keys are normalised to it case-insensitively.
    pub name: String,
    pub default_restart_policy: RestartPolicy,
    /// The replica count when the spec gives none.
    pub default_replicas: i32,
    /// Whether this role's pods carry `training.kubeflow.org/job-role=master` and decide success.
    pub master: bool,
}

impl Role {
    pub fn new(name: impl Into<String>, default_restart_policy: RestartPolicy) -> Self {
        Self {
            name: name.into(),
            default_restart_policy,
            default_replicas: 1,
            master: false,
        }
    }

    #[must_use]
    pub fn master(mut self) -> Self {
        self.master = true;
        self
    }

    #[must_use]
    pub fn default_replicas(mut self, replicas: i32) -> Self {
        self.default_replicas = replicas;
        self
    }
}

/// The static facts about a framework.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameworkInfo {
    /// Event source and `training.kubeflow.org/operator-name` label, e.g. `pytorchjob-controller`.
    pub controller_name: String,
    /// Metrics label, e.g. `pytorch`.
    pub framework_name: String,
    /// The container that gets the default port and whose ports the headless services expose.
    pub default_container: String,
    pub default_port_name: String,
    pub default_port: i32,
    /// Known roles, in the order they are reconciled and reported.
    pub roles: Vec<Role>,
}

impl FrameworkInfo {
    pub fn role(&self, name: &str) -> Option<&Role> {
        self.roles.iter().find(|r| r.name.eq_ignore_ascii_case(name))
    }
}

/// What `decorate_pod` knows about the pod being built.
#[derive(Debug)]
pub struct PodContext<'a, J> {
    pub job: &'a J,
    /// Defaulted replica specs, keyed by canonical role name.
    pub specs: &'a BTreeMap<String, ReplicaSpec>,
    pub role: &'a str,
    pub index: i32,
}

impl<J: TrainingJob> PodContext<'_, J> {
    /// Runs `f` with this pod's template context: job name and namespace, role, index, specs.
    pub fn with_env<R>(&self, info: &FrameworkInfo, f: impl FnOnce(&crate::env::EnvContext<'_>) -> R) -> R {
        use kube::ResourceExt;
        let (job, namespace) = (self.job.name_any(), self.job.namespace().unwrap_or_default());
        f(&crate::env::EnvContext {
            info,
            job: &job,
            namespace: &namespace,
            specs: self.specs,
            role: self.role,
            index: self.index,
        })
    }
}

/// Where a job is in its life, for [`Framework::desired_objects`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobPhase {
    /// Neither suspended nor finished: pods are being run.
    Active,
    Suspended,
    /// Succeeded or failed.
    Finished,
}

/// What [`Framework::desired_objects`] knows about the job.
#[derive(Debug)]
pub struct JobContext<'a, J> {
    pub job: &'a J,
    /// Defaulted replica specs, keyed by canonical role name.
    pub specs: &'a BTreeMap<String, ReplicaSpec>,
    /// The job's children as the caches show them, including owned objects of
    /// [`Framework::owned_kinds`].
    pub observed: &'a Observed,
    pub phase: JobPhase,
}

/// An error a framework hook reports for one job (shown in the log; the job is retried with
/// backoff), with the error that caused it when there is one.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct FrameworkError {
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl FrameworkError {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            source: None,
        }
    }

    /// `message` says what was being done; `source` is what went wrong.
    pub fn with_source(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }
}

/// A training framework: the part of an operator that is not shared.
pub trait Framework: Send + Sync + 'static {
    type Job: TrainingJob;

    /// The framework's static facts; by default those of its job kind.
    fn info(&self) -> &FrameworkInfo {
        <Self::Job as TrainingJob>::framework_info()
    }

    /// Whether the pod of `role`/`index` is the job's master (labelled `job-role=master`).
    /// Default: every pod of a role marked `master`.
    fn is_master(&self, specs: &BTreeMap<String, ReplicaSpec>, role: &str, index: i32) -> bool {
        let _ = (specs, index);
        self.info().role(role).is_some_and(|r| r.master)
    }

    /// Adds framework environment, init containers or volumes to a pod about to be created.
    fn decorate_pod(
        &self,
        ctx: &PodContext<'_, Self::Job>,
        template: &mut PodTemplateSpec,
    ) -> Result<(), FrameworkError> {
        let _ = (ctx, template);
        Ok(())
    }

    /// When the job has succeeded. Default: every master replica succeeded, or without a
    /// master in the job, every replica of every role.
    fn success_policy(&self, job: &Self::Job, specs: &BTreeMap<String, ReplicaSpec>) -> SuccessPolicy {
        let _ = job;
        SuccessPolicy::master_else_all(self.info(), specs)
    }

    /// Sets the job's conditions from its replicas' states after the pods were reconciled.
    /// Default: [`StatusUpdate::apply_policy`] with [`Framework::success_policy`].
    fn update_status(&self, job: &Self::Job, update: &mut StatusUpdate<'_, '_>) {
        let policy = self.success_policy(job, update.specs());
        update.apply_policy(&policy);
    }

    /// Whether each replica gets a headless service named like its pod.
    fn creates_services(&self) -> bool {
        true
    }

    /// Whether the engine creates pods for `role` (MPI's launcher runs in a batch Job instead).
    fn creates_pods(&self, role: &str) -> bool {
        let _ = role;
        true
    }

    /// Kinds of objects, besides pods and services, that this framework's jobs own: they are
    /// watched (label `training.kubeflow.org/operator-name` present), and an owned one that
    /// [`Framework::desired_objects`] no longer returns is deleted.
    fn owned_kinds(&self) -> Vec<kube::api::ApiResource> {
        Vec::new()
    }

    /// The objects of [`Framework::owned_kinds`] the job should have now. Pure: everything it
    /// needs is in `ctx`; randomness (keys) belongs in [`Framework::prepare_object`].
    fn desired_objects(&self, ctx: &JobContext<'_, Self::Job>) -> Result<Vec<DesiredObject>, FrameworkError> {
        let _ = ctx;
        Ok(Vec::new())
    }

    /// Completes an object just before it is created, with what a pure plan cannot hold
    /// (e.g. a freshly generated key pair).
    fn prepare_object(&self, object: &mut kube::api::DynamicObject) -> Result<(), FrameworkError> {
        let _ = object;
        Ok(())
    }
}
