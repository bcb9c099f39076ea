//! A framework as data: `kfop.yaml` parsed and validated ([`model`]), then loaded into the
//! [`Manifest`] the engine runs ([`load`]). A compiled operator embeds its `kfop.yaml` and loads
//! it exactly as the operator loads a `Framework` object applied at run time.
use kube::api::ApiResource;

mod fingerprint;
mod load;
pub mod model;

pub use fingerprint::fingerprint;
pub use load::LoadError;

use crate::env::EnvSpec;
use crate::info::FrameworkInfo;
use crate::status_rule::StatusRule;

/// One framework's manifest as the engine uses it.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// Identity: controller and framework names, roles, default container and port.
    pub info: FrameworkInfo,
    /// The job kind's API resource.
    pub kind: ApiResource,
    /// The manifest's `env`, parsed.
    pub env: Vec<EnvSpec>,
    /// How replica states become the job's conditions.
    pub status: StatusRule,
    /// Which pods carry `training.kubeflow.org/job-role=master`.
    pub master: MasterRule,
    /// Kinds of objects, besides pods, services and PodGroups, that the jobs own.
    pub owned: Vec<ApiResource>,
    /// Whether the manifest says the framework has code (`hooks: true`).
    pub hooks: bool,
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
