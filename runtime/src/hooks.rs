//! What a manifest cannot say, as one trait whose every method has a default: a framework is
//! its [`Manifest`] plus `impl Hooks for ... {}`, and this module makes the pair a [`Framework`].
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use kube::api::{ApiResource, DynamicObject};

use crate::api::{CleanPodPolicy, ReplicaSpec};
use crate::framework::{
    Framework, FrameworkError, JobContext, JobName, LifecycleWording, PodContext, TrainingJob,
};
use crate::manifest::Manifest;
use crate::plan::{DesiredObject, StatusUpdate};
use crate::policy::SuccessPolicy;
use crate::status_rule::StatusRule;

/// A framework's code: pod decoration, status, owned objects and the master pods, each
/// defaulting to what the manifest says. The engine calls them in this order per pod: the
/// engine's defaults, the manifest's `env`, [`Hooks::decorate_pod`], gang scheduling.
pub trait Hooks: Manifest {
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

    /// Whether the engine creates pods for `role` of `job` (an mpi-operator MPIJob's launcher
    /// runs in a batch Job instead).
    fn creates_pods(&self, job: &Self::Job, role: &str) -> bool {
        let _ = (job, role);
        true
    }

    /// Which pods to delete once `job` ends (training-operator's MPIJob v1 falls back to a
    /// deprecated `spec.cleanPodPolicy`). Default: its `runPolicy.cleanPodPolicy`.
    fn clean_pod_policy(&self, job: &Self::Job) -> CleanPodPolicy {
        job.run_policy().clean_pod_policy()
    }

    /// The restart policy of `role` of `job` when its spec sets none, where it differs from the
    /// role's static default (an MPIJob created as v1 defaults its launcher to Never). Default:
    /// none, the role's own.
    fn default_restart_policy(&self, job: &Self::Job, role: &str) -> Option<crate::api::RestartPolicy> {
        let _ = (job, role);
        None
    }

    /// The name of the pod of `role`/`index` (training-operator's MPIJob v1 names its one
    /// launcher `<job>-launcher`). Default: Kubeflow's `<job>-<role>-<index>`.
    fn pod_name(&self, job: &Self::Job, role: &str, index: i32) -> String {
        crate::labels::child_name(&kube::ResourceExt::name_any(job), role, index)
    }

    /// Whether each replica gets a headless service named like its pod.
    fn creates_services(&self) -> bool {
        true
    }

    /// Kinds of objects, besides pods and services, that the jobs own: watched, and deleted when
    /// [`Hooks::desired_objects`] no longer returns one. Default: the manifest's `resources`.
    fn owned_kinds(&self) -> Vec<ApiResource> {
        self.manifest().owned.clone()
    }

    /// The objects of the manifest's `resources` the job should have now. Pure: everything it
    /// needs is in `ctx`; randomness (keys) belongs in [`Hooks::prepare_object`]. An owned
    /// object no longer returned is deleted.
    fn desired_objects(&self, ctx: &JobContext<'_, Self::Job>) -> Result<Vec<DesiredObject>, FrameworkError> {
        let _ = ctx;
        Ok(Vec::new())
    }

    /// Completes an object just before it is created, with what a pure plan cannot hold
    /// (e.g. a freshly generated key pair).
    fn prepare_object(&self, object: &mut DynamicObject) -> Result<(), FrameworkError> {
        let _ = object;
        Ok(())
    }
}

impl<H: Hooks> Framework for H {
    type Job = H::Job;

    fn info(&self) -> &crate::info::FrameworkInfo {
        Manifest::info(self)
    }

    fn job_type(&self) -> <Self::Job as kube::Resource>::DynamicType {
        Manifest::job_type(self)
    }

    fn is_master(&self, specs: &BTreeMap<String, ReplicaSpec>, role: &str, index: i32) -> bool {
        let declared = Framework::info(self).role(role).is_some_and(|r| r.master);
        let by_manifest = self.manifest().master.is_master(declared, index);
        Hooks::is_master(self, specs, role, index, by_manifest)
    }

    fn decorate_pod(
        &self,
        ctx: &PodContext<'_, Self::Job>,
        template: &mut PodTemplateSpec,
    ) -> Result<(), FrameworkError> {
        let env = self
            .manifest()
            .env
            .as_ref()
            .map_err(|e| FrameworkError::new(format!("the manifest's env: {e}")))?;
        ctx.with_env(Framework::info(self), |e| crate::env::inject(env, e, template))
            .map_err(|e| FrameworkError::with_source("injecting the manifest's env", e))?;
        Hooks::decorate_pod(self, ctx, template)
    }

    fn update_status(&self, job: &Self::Job, update: &mut StatusUpdate<'_>) {
        match &self.manifest().status {
            StatusRule::Hook => Hooks::update_status(self, job, update),
            rule => update.apply_rule(rule),
        }
    }

    fn lifecycle_wording(&self, job: &Self::Job, name: JobName<'_>) -> LifecycleWording {
        Hooks::lifecycle_wording(self, job, name)
    }

    fn creates_services(&self) -> bool {
        Hooks::creates_services(self)
    }

    fn creates_pods(&self, job: &Self::Job, role: &str) -> bool {
        Hooks::creates_pods(self, job, role)
    }

    fn default_restart_policy(&self, job: &Self::Job, role: &str) -> Option<crate::api::RestartPolicy> {
        Hooks::default_restart_policy(self, job, role)
    }

    fn pod_name(&self, job: &Self::Job, role: &str, index: i32) -> String {
        Hooks::pod_name(self, job, role, index)
    }

    fn clean_pod_policy(&self, job: &Self::Job) -> CleanPodPolicy {
        Hooks::clean_pod_policy(self, job)
    }

    fn owned_kinds(&self) -> Vec<ApiResource> {
        Hooks::owned_kinds(self)
    }

    /// Also where a status rule that does not compile surfaces: the status update that could not
    /// use it counted it as false, and this fails the reconcile with the reason.
    fn desired_objects(&self, ctx: &JobContext<'_, Self::Job>) -> Result<Vec<DesiredObject>, FrameworkError> {
        self.manifest()
            .status
            .check()
            .map_err(|e| FrameworkError::with_source("the manifest's status rule", e.clone()))?;
        Hooks::desired_objects(self, ctx)
    }

    fn prepare_object(&self, object: &mut DynamicObject) -> Result<(), FrameworkError> {
        Hooks::prepare_object(self, object)
    }
}
