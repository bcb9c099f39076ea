//! What the engine needs of a framework: identity, roles, pod decoration, status and owned
//! objects, and the types those hooks see. Everything but identity has a default.
use std::collections::BTreeMap;
use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;

mod desired;
mod loaded;
mod observed;
mod status_update;
mod wording;

pub use crate::child_view::{ObservedPod, ObservedService, observed_service};
pub use desired::{DesiredObject, SyncPolicy, find, is_kind};
pub use loaded::Loaded;
pub use observed::{Observed, Scheduling};
pub use status_update::{
    EventType, JobEvent, JobMetric, JobName, RoleCounts, RoleState, StatusOutput, StatusUpdate,
};
pub use wording::LifecycleWording;

use crate::api::{JobStatus, ReplicaSpec, RunPolicy};
pub use crate::info::{FrameworkInfo, FrameworkPort, Role};
use crate::policy::SuccessPolicy;

/// What identifies a job kind to kube's typed APIs: `()` for a compiled kind, the kind's
/// [`kube::api::ApiResource`] for one registered at run time ([`crate::dynamic`]).
pub trait JobType: Clone + Default + Eq + std::hash::Hash + Debug + Unpin + Send + Sync + 'static {
    /// The value for the kind a manifest names.
    fn of_kind(kind: &kube::api::ApiResource) -> Self;
}

/// A compiled kind's types say everything.
impl JobType for () {
    fn of_kind(_: &kube::api::ApiResource) -> Self {}
}

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
    /// container and port. `kfop-derive` generates it from the attribute `kfop gen` writes from
    /// the manifest; a kind registered at run time has none of its own (its manifest holds them).
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
    /// The framework's identity, from its manifest.
    pub info: &'a FrameworkInfo,
    /// Defaulted replica specs, keyed by canonical role name.
    pub specs: &'a BTreeMap<String, ReplicaSpec>,
    pub role: &'a str,
    pub index: i32,
}

impl<J: TrainingJob> PodContext<'_, J> {
    /// Runs `f` with this pod's template context: job name and namespace, role, index, specs.
    pub fn with_env<R>(&self, f: impl FnOnce(&crate::env::EnvContext<'_>) -> R) -> R {
        use kube::ResourceExt;
        let (job, namespace) = (self.job.name_any(), self.job.namespace().unwrap_or_default());
        f(&crate::env::EnvContext {
            info: self.info,
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

/// A framework's code: what its manifest cannot say. Every method has a default, so a framework
/// whose manifest says everything is `impl Framework for Foo { type Job = FooJob; }`. The engine
/// calls, per pod: its defaults, the manifest's `env`, [`Framework::decorate_pod`], gang
/// scheduling. Configuration reaches the code through its constructor (the value the operator
/// registers), never through the environment or globals.
///
/// A kind served in several API versions whose jobs keep the semantics of the version they were
/// created in (MPIJob: training-operator's `v1`, mpi-operator's `v2beta1`) has one framework per
/// version and says which runs a job in [`Framework::for_job`].
pub trait Framework: Send + Sync + 'static {
    type Job: TrainingJob;

    /// The framework that runs `job`: this one, unless the kind's versions differ in
    /// semantics. The engine asks it before every per-job call below.
    fn for_job(&self, job: &Self::Job) -> &dyn Framework<Job = Self::Job>
    where
        Self: Sized,
    {
        let _ = job;
        self
    }

    /// Whether the pod of `role`/`index` is the job's master (labelled
    /// `training.kubeflow.org/job-role=master`); `by_manifest` is what the manifest's `master`
    /// flags and `masterPods` say.
    fn is_master(
        &self,
        specs: &BTreeMap<String, ReplicaSpec>,
        role: &str,
        index: i32,
        by_manifest: bool,
    ) -> bool {
        let _ = (specs, role, index);
        by_manifest
    }

    /// Changes a pod about to be created, after the manifest's environment was injected.
    fn decorate_pod(
        &self,
        ctx: &PodContext<'_, Self::Job>,
        template: &mut PodTemplateSpec,
    ) -> Result<(), FrameworkError> {
        let _ = (ctx, template);
        Ok(())
    }

    /// Sets the job's conditions after its pods were reconciled. Called only when the manifest
    /// says `status: {rule: hook}`; otherwise its status rule decides. Default: every replica of
    /// every role succeeded is success.
    fn update_status(&self, job: &Self::Job, update: &mut StatusUpdate<'_>) {
        let _ = job;
        update.apply_policy(&SuccessPolicy::AllRoles);
    }

    /// What the conditions the engine sets itself (Created, Suspended) say, whatever the status
    /// rule. Default: training-operator's wording.
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

    /// Whether the engine deletes `job` once `runPolicy.ttlSecondsAfterFinished` has passed
    /// after it finished. Default: yes, as training-operator does. An mpi-operator MPIJob gives
    /// the TTL to its launcher batch Job instead and is itself never deleted by it.
    fn deletes_job_after_ttl(&self, job: &Self::Job) -> bool {
        let _ = job;
        true
    }

    /// The apiVersion the owner references of `job`'s children name it by, where it is not the
    /// version the engine reads jobs in (an MPIJob created as `kubeflow.org/v1` is read as
    /// `v2beta1`; training-operator's children name it `kubeflow.org/v1`). Default: none, the
    /// engine's. Child events reach the job's controller whatever version they name.
    fn owner_api_version(&self, job: &Self::Job) -> Option<String> {
        let _ = job;
        None
    }

    /// The restart policy of `role` of `job` when its spec sets none, where it differs from the
    /// role's static default. Default: none, the role's own.
    fn default_restart_policy(&self, job: &Self::Job, role: &str) -> Option<crate::api::RestartPolicy> {
        let _ = (job, role);
        None
    }

    /// The name of the pod of `role`/`index`. Default: Kubeflow's `<job>-<role>-<index>`.
    fn pod_name(&self, job: &Self::Job, role: &str, index: i32) -> String {
        crate::labels::child_name(&kube::ResourceExt::name_any(job), role, index)
    }

    /// Kinds of owned objects besides the manifest's `resources`: watched (label
    /// `training.kubeflow.org/operator-name` present), and an owned one that
    /// [`Framework::desired_objects`] no longer returns is deleted.
    fn owned_kinds(&self) -> Vec<kube::api::ApiResource> {
        Vec::new()
    }

    /// The owned objects the job should have now. Pure: everything it needs is in `ctx`;
    /// randomness (keys) belongs in [`Framework::prepare_object`].
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
