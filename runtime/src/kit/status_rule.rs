//! How a framework's replica states become its job's conditions (`spec.status` in `kfop.yaml`):
//! data the manifest carries and the status pass in [`crate::framework`] runs, kept apart from
//! both so neither imports the other.
use crate::cel_rule::{CelError, CelRule};
use crate::policy::SuccessPolicy;

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
    /// The framework's [`crate::framework::Framework::update_status`] decides.
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

/// `rule: cel`. Each rule keeps its own compile error: a generated framework's rules compile
/// when a job first needs them, and a rule that does not compile fails reconciles, not the
/// operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CelStatus {
    /// The job succeeded.
    pub succeeded: CelRule,
    /// The job runs; `None`: a role whose counts `succeeded` reads is active.
    pub running: Option<CelRule>,
    /// The job failed (checked first).
    pub failed: Option<CelRule>,
    pub wording: RuleWording,
}

impl CelStatus {
    /// Every expression the rule has.
    fn rules(&self) -> impl Iterator<Item = &CelRule> {
        [Some(&self.succeeded), self.running.as_ref(), self.failed.as_ref()]
            .into_iter()
            .flatten()
    }
}

impl StatusRule {
    /// Why the rule cannot run, if it cannot: an expression that does not compile (compiled now
    /// if it was deferred).
    pub fn check(&self) -> Result<(), &CelError> {
        match self {
            Self::Cel(cel) => cel.rules().find_map(CelRule::error).map_or(Ok(()), Err),
            Self::SuccessRules { .. } | Self::LeaderOrFollowers { .. } | Self::Hook => Ok(()),
        }
    }
}
