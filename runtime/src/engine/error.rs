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

    #[error("reading the cached job {job}: {source}")]
    Unpack { job: String, source: serde_json::Error },

    #[error("preparing {object}: {source}")]
    Prepare {
        object: String,
        source: crate::framework::FrameworkError,
    },

    /// A compiled framework's embedded manifest did not load (the build checks it: a bug).
    #[error("loading a framework's manifest: {0}")]
    Load(#[from] crate::manifest::LoadError),
    #[error("Kubernetes client configuration, {action}: {source}")]
    Config {
        action: &'static str,
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    #[error("serializing the {kind} CRD: {source}")]
    CrdYaml {
        kind: String,
        source: serde_saphyr::ser::Error,
    },

    #[error(transparent)]
    Webhook(#[from] crate::webhook::WebhookError),

    #[error("metrics and health server: {0}")]
    Server(#[from] crate::server::ServerError),

    #[error("leader election: {what}")]
    LeaderElection {
        what: &'static str,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },

    #[error(transparent)]
    NotSynced(#[from] crate::child_index::NotSynced),

    #[error("a controller task ended abnormally: {0}")]
    Task(#[from] tokio::task::JoinError),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
