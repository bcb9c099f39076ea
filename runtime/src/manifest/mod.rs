//! A framework as data: what `kfop gen` writes from `kfop.yaml` (environment, success rules,
//! status function, master pods, owned kinds), read by the generic framework in [`crate::hooks`];
//! [`model`] is `kfop.yaml` itself, parsed and validated.
use kube::api::ApiResource;

pub mod model;

use crate::env::{EnvSpec, TemplateError};
use crate::framework::TrainingJob;
use crate::info::FrameworkInfo;
use crate::status_rule::StatusRule;

/// The manifest of one framework, as the runtime uses it.
#[derive(Debug)]
pub struct FrameworkManifest {
    /// The manifest's `env`, parsed; an error here is a template the generator let through.
    pub env: Result<Vec<EnvSpec>, TemplateError>,
    /// How replica states become the job's conditions.
    pub status: StatusRule,
    /// Which pods carry `training.kubeflow.org/job-role=master`.
    pub master: MasterRule,
    /// Kinds of objects, besides pods, services and PodGroups, that the jobs own.
    pub owned: Vec<ApiResource>,
}

/// Which pods are the job's master (`spec.masterPods` in `kfop.yaml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MasterRule {
    /// Every pod of a role marked `master: true`.
    #[default]
    Roles,
    /// Pod 0 of every role (Kubeflow's JAX: the coordinator is worker 0).
    IndexZero,
}

impl MasterRule {
    pub fn is_master(self, declared: bool, index: i32) -> bool {
        match self {
            Self::Roles => declared,
            Self::IndexZero => index == 0,
        }
    }
}

/// A framework's data side, implemented by the code `kfop gen` writes: its job kind and its
/// manifest. With [`crate::hooks::Hooks`] (empty for a manifest-only framework) it is a
/// [`crate::Framework`].
pub trait Manifest: Send + Sync + 'static {
    type Job: TrainingJob;

    fn manifest(&self) -> &FrameworkManifest;

    /// The framework's static facts; by default those of its compiled job kind. A framework
    /// registered at run time says its own.
    fn info(&self) -> &FrameworkInfo {
        <Self::Job as TrainingJob>::framework_info()
    }

    /// The job kind's dynamic type (see [`crate::framework::Framework::job_type`]).
    fn job_type(&self) -> <Self::Job as kube::Resource>::DynamicType {
        Default::default()
    }
}
