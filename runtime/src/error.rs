use crate::plan::PlanError;

/// Errors of the reconcile loop and the manager. Each names the object and what was being done.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("planning {job}: {source}")]
    Plan { job: String, source: PlanError },

    #[error("{action} {kind} {name}: {source}")]
    Kube {
        action: &'static str,
        kind: &'static str,
        name: String,
        source: kube::Error,
    },

    #[error(
        "the {kind} API is not served ({source}); install its CustomResourceDefinition first \
         (`kubectl apply --server-side -f <crd.yaml>`)"
    )]
    CrdMissing { kind: String, source: kube::Error },

    #[error("preparing {object}: {source}")]
    Prepare {
        object: String,
        source: crate::framework::FrameworkError,
    },

    #[error("Kubernetes client configuration: {0}")]
    Config(String),

    #[error("metrics and health server: {0}")]
    Server(#[from] crate::server::ServerError),

    #[error("leader election: {0}")]
    LeaderElection(String),
}

impl Error {
    /// A short stable label for the error metric.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Plan { .. } => "plan",
            Self::Kube { .. } => "kube",
            Self::CrdMissing { .. } => "crd_missing",
            Self::Prepare { .. } => "prepare",
            Self::Config(_) => "config",
            Self::Server(_) => "server",
            Self::LeaderElection(_) => "leader_election",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
