//! A framework as data: what `kfop gen` writes from `kfop.yaml` (environment, success rules,
//! status function, master pods, owned kinds), read by the generic framework in [`crate::hooks`];
//! [`model`] is `kfop.yaml` itself, parsed and validated.
use kube::api::ApiResource;

pub mod model;

use crate::cel_rule::{CelError, CelRule};
use crate::env::{EnvSpec, TemplateError};
use crate::framework::TrainingJob;
use crate::info::FrameworkInfo;
use crate::policy::SuccessPolicy;

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

/// Which status function sets the job's conditions (`spec.status` in `kfop.yaml`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatusRule {
    /// The manifest's `success` rules, the first role present in a job deciding (none present:
    /// every role), by [`crate::plan::StatusUpdate::apply_policy_worded`].
    SuccessRules {
        rules: Vec<SuccessPolicy>,
        wording: RuleWording,
    },
    /// Kubeflow's PyTorch-style function: the leader role decides when the job has one, else
    /// the followers ([`crate::plan::StatusUpdate::apply_leader_or_followers`]).
    LeaderOrFollowers {
        leader: Option<String>,
        followers: String,
    },
    /// The framework's [`crate::hooks::Hooks::update_status`] decides.
    Hook,
    /// CEL expressions over the roles' counts ([`crate::plan::StatusUpdate::apply_expressions`]).
    Cel(CelStatus),
}

/// What the `successRules` and `cel` rules say besides when a job succeeds: how their Failed
/// and Restarting messages open, and which restarts they announce.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleWording {
    /// The word that opens Failed and Restarting messages; `None` is the kind.
    pub subject: Option<String>,
    /// Restarts under restartPolicy ExitCode are announced (Kubeflow's XGBoost and MXNet).
    pub exit_code_restart_events: bool,
}

/// `rule: cel`. Each expression is kept as compiled, error included: a generated framework
/// compiles its rules when it starts, and a rule that does not compile fails reconciles, not the
/// operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CelStatus {
    /// The job succeeded.
    pub succeeded: Result<CelRule, CelError>,
    /// The job runs; `None`: a role whose counts `succeeded` reads is active.
    pub running: Option<Result<CelRule, CelError>>,
    /// The job failed (checked first).
    pub failed: Option<Result<CelRule, CelError>>,
    pub wording: RuleWording,
}

impl CelStatus {
    /// Every expression the rule has.
    fn rules(&self) -> impl Iterator<Item = &Result<CelRule, CelError>> {
        [Some(&self.succeeded), self.running.as_ref(), self.failed.as_ref()]
            .into_iter()
            .flatten()
    }
}

impl StatusRule {
    /// Why the rule cannot run, if it cannot: an expression that did not compile.
    pub fn check(&self) -> Result<(), &CelError> {
        match self {
            Self::Cel(cel) => cel.rules().try_for_each(|rule| rule.as_ref().map(drop)),
            Self::SuccessRules { .. } | Self::LeaderOrFollowers { .. } | Self::Hook => Ok(()),
        }
    }
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
