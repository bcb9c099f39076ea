//! What the engine needs of a framework: identity, roles, pod decoration, status and owned
//! objects, and the types those hooks see. Everything but identity has a default.
use std::collections::BTreeMap;
use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;

mod objects;
mod observed;
mod status;
mod wording;

pub use crate::observed_child::{ObservedPod, ObservedService, observed_service};
pub use objects::{DesiredObject, SyncPolicy, find, is_kind};
pub use observed::{Observed, Scheduling};
pub use status::{
    EventType, JobEvent, JobMetric, JobName, RoleCounts, RoleState, StatusOutput, StatusUpdate,
};
pub use wording::LifecycleWording;

use crate::api::{JobStatus, ReplicaSpec, RunPolicy};
pub use crate::info::{FrameworkInfo, FrameworkPort, Role};
use crate::policy::SuccessPolicy;

/// What identifies a job kind to kube's typed APIs: `()` for a compiled kind, the kind's
/// [`kube::api::ApiResource`] for one registered at run time ([`crate::dynamic`]).
/// `Default` is the compiled kind's only value; a run-time framework always says its own.
pub trait JobType: Clone + Default + Eq + std::hash::Hash + Debug + Unpin + Send + Sync + 'static {}

impl<T: Clone + Default + Eq + std::hash::Hash + Debug + Unpin + Send + Sync + 'static> JobType for T {}

/// A training-job custom resource: a spec with replica specs and a run policy, and a status.
/// `kfop-derive` implements it; hand-written types can too.
pub trait TrainingJob:
    Resource<DynamicType: JobType, Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The static facts of this job kind: controller and framework names, roles, default
    /// container and port. `kfop-derive` generates it from the attribute; a kind registered at
    /// run time has none of its own (its framework's [`Framework::info`] holds them).
    fn framework_info() -> &'static FrameworkInfo;

    /// The replica specs keyed by replica type, as the user wrote them.
    fn replica_specs(&self) -> &BTreeMap<String, ReplicaSpec>;
    fn run_policy(&self) -> &RunPolicy;
    fn status(&self) -> Option<&JobStatus>;
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

    /// The job kind's dynamic type: `()` for a compiled kind (the default), the kind's API
    /// resource for one registered at run time.
    fn job_type(&self) -> <Self::Job as Resource>::DynamicType {
        Default::default()
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

    /// Sets the job's conditions from its replicas' states after the pods were reconciled.
    /// Default: [`StatusUpdate::apply_policy`] with every master replica succeeded as success,
    /// or without a master in the job, every replica of every role.
    fn update_status(&self, job: &Self::Job, update: &mut StatusUpdate<'_>) {
        let _ = job;
        let policy = SuccessPolicy::master_else_all(self.info(), update.specs());
        update.apply_policy(&policy);
    }

    /// What the conditions the engine sets itself (Created, Suspended) say. Default:
    /// training-operator's wording.
    fn lifecycle_wording(&self, job: &Self::Job, name: JobName<'_>) -> LifecycleWording {
        let _ = job;
        LifecycleWording::training_operator(name)
    }

    /// Whether each replica gets a headless service named like its pod.
    fn creates_services(&self) -> bool {
        true
    }

    /// Whether the engine creates pods for `role` of `job` (an mpi-operator MPIJob's launcher
    /// runs in a batch Job instead).
    fn creates_pods(&self, job: &Self::Job, role: &str) -> bool {
        let _ = (job, role);
        true
    }

    /// Which pods to delete once `job` ends. Default: its `runPolicy.cleanPodPolicy`.
    fn clean_pod_policy(&self, job: &Self::Job) -> crate::api::CleanPodPolicy {
        job.run_policy().clean_pod_policy()
    }

    /// The restart policy of `role` of `job` when its spec sets none, where it differs from the
    /// role's static default (an MPIJob created as v1 defaults its launcher to Never, as
    /// training-operator does). Default: none, the role's own.
    fn default_restart_policy(&self, job: &Self::Job, role: &str) -> Option<crate::api::RestartPolicy> {
        let _ = (job, role);
        None
    }

    /// The name of the pod of `role`/`index`. Default: Kubeflow's `<job>-<role>-<index>`.
    fn pod_name(&self, job: &Self::Job, role: &str, index: i32) -> String {
        crate::labels::child_name(&kube::ResourceExt::name_any(job), role, index)
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
