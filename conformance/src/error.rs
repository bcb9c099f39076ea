use std::path::PathBuf;

/// What can stop the differential runner (a difference between the operators is not an error:
/// it is the runner's result).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Env(#[from] kfop_testenv::Error),

    #[error("Kubernetes API error while {context}: {source}")]
    Kube { context: String, source: kube::Error },

    #[error("I/O error on {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },

    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },

    #[error("case {case}: {message}")]
    Case { case: String, message: String },

    #[error("kfop-operator: {0}")]
    Operator(String),

    #[error("building an object: {0}")]
    Build(String),

    #[error("a task of the runner failed: {0}")]
    Task(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { path, source }
    }

    pub(crate) fn kube(context: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let context = context.into();
        move |source| Self::Kube { context, source }
    }

    pub(crate) fn parse(path: impl Into<PathBuf>, message: impl ToString) -> Self {
        Self::Parse {
            path: path.into(),
            message: message.to_string(),
        }
    }
}
