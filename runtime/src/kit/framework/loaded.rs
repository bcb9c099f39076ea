//! A framework ready to run: its [`Manifest`] and its code, whether compiled in or applied at
//! run time. The engine asks this, never the manifest or the code alone, so what the manifest
//! says (environment, status rule, master pods, owned kinds) and what the code adds are joined
//! in one place.
use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;
use kube::api::ApiResource;

use super::{
    DesiredObject, Framework, FrameworkError, FrameworkInfo, JobContext, JobType, PodContext, StatusUpdate,
};
use crate::api::ReplicaSpec;
use crate::manifest::{LoadError, Manifest};
use crate::status_rule::StatusRule;

/// A manifest with the code for what it cannot say.
#[derive(Debug)]
pub struct Loaded<F: Framework> {
    manifest: Manifest,
    job_type: <F::Job as Resource>::DynamicType,
    code: F,
}

impl<F: Framework> Loaded<F> {
    /// `code` for the framework `manifest` describes.
    pub fn new(manifest: Manifest, code: F) -> Self {
        let job_type = JobType::of_kind(&manifest.kind);
        Self {
            manifest,
            job_type,
            code,
        }
    }

    /// Loads manifest text (a compiled operator's embedded `kfop.yaml`) and adds `code`.
    pub fn load(text: &str, file: &Path, code: F) -> Result<Self, LoadError> {
        Ok(Self::new(Manifest::load(text, file)?, code))
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    pub fn info(&self) -> &FrameworkInfo {
        &self.manifest.info
    }

    /// The job kind's API resource.
    pub fn kind(&self) -> &ApiResource {
        &self.manifest.kind
    }

    /// The job kind's dynamic type: `()` for a compiled kind.
    pub fn job_type(&self) -> &<F::Job as Resource>::DynamicType {
        &self.job_type
    }

    /// The code that runs `job` ([`Framework::for_job`]).
    pub fn code_for(&self, job: &F::Job) -> &dyn Framework<Job = F::Job> {
        self.code.for_job(job)
    }

    /// The controller owner reference of `job`'s children, at the apiVersion the code names
    /// ([`Framework::owner_api_version`]).
    pub fn owner_reference(&self, job: &F::Job) -> OwnerReference {
        let mut owner = crate::labels::owner_reference(job, &self.job_type);
        if let Some(api_version) = self.code_for(job).owner_api_version(job) {
            owner.api_version = api_version;
        }
        owner
    }

    /// The code as registered, for what does not depend on a job.
    pub fn code(&self) -> &F {
        &self.code
    }

    /// The manifest's master flags and `masterPods`, then the code's say.
    pub fn is_master(
        &self,
        job: &F::Job,
        specs: &BTreeMap<String, ReplicaSpec>,
        role: &str,
        index: i32,
    ) -> bool {
        let declared = self.info().role(role).is_some_and(|r| r.master);
        let by_manifest = self.manifest.master.is_master(declared, index);
        self.code_for(job).is_master(specs, role, index, by_manifest)
    }

    /// The manifest's environment, then the code's decoration.
    pub fn decorate_pod(
        &self,
        ctx: &PodContext<'_, F::Job>,
        template: &mut PodTemplateSpec,
    ) -> Result<(), FrameworkError> {
        ctx.with_env(|e| crate::env::inject(&self.manifest.env, e, template))
            .map_err(|e| FrameworkError::with_source("injecting the manifest's env", e))?;
        self.code_for(ctx.job).decorate_pod(ctx, template)
    }

    /// The manifest's status rule, or the code's when the rule is `hook`.
    pub fn update_status(&self, job: &F::Job, update: &mut StatusUpdate<'_>) {
        match &self.manifest.status {
            StatusRule::Hook => self.code_for(job).update_status(job, update),
            rule => update.apply_rule(rule),
        }
    }

    /// The manifest's `resources` and the code's own kinds, each once.
    pub fn owned_kinds(&self) -> Vec<ApiResource> {
        let mut kinds = self.manifest.owned.clone();
        for kind in self.code.owned_kinds() {
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        kinds
    }

    /// The code's owned objects. Also where a status rule that does not compile surfaces: the
    /// status update that could not use it counted it as false, and this fails the reconcile
    /// with the reason.
    pub fn desired_objects(
        &self,
        ctx: &JobContext<'_, F::Job>,
    ) -> Result<Vec<DesiredObject>, FrameworkError> {
        self.manifest
            .status
            .check()
            .map_err(|e| FrameworkError::with_source("the manifest's status rule", e.clone()))?;
        self.code_for(ctx.job).desired_objects(ctx)
    }
}
