//! The benchmark's errors.
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Plane(#[from] kfop_testenv::Error),
    #[error("{context}: {source}")]
    Kube { context: String, source: kube::Error },
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("cannot parse {0}")]
    Proc(String),
    #[error("operator: {0}")]
    Operator(String),
    #[error("metrics endpoint: {0}")]
    Scrape(String),
    #[error("plot {file}: {message}")]
    Plot { file: String, message: String },
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("{phase}: {message}")]
    Phase { phase: String, message: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn io(path: impl AsRef<Path>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.as_ref().display().to_string(),
            source,
        }
    }

    /// For `map_err`: a kube error with what was being done.
    pub fn kube(context: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let context = context.into();
        move |source| Self::Kube { context, source }
    }
}
