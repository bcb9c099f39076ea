use std::path::PathBuf;

/// Everything that can go wrong while starting, attaching to or using the test environment.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "control-plane binary `{name}` not found in {dir}; build the control plane once with `{command}` \
         (or set KFOP_CONTROL_PLANE_BIN to a directory holding etcd, kube-apiserver, \
         kube-controller-manager, kube-scheduler and kwok)"
    )]
    MissingBinary {
        name: String,
        dir: PathBuf,
        command: &'static str,
    },

    #[error("I/O error on {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },

    #[error("could not start {component}: {source}")]
    Spawn {
        component: String,
        source: std::io::Error,
    },

    #[error("{component} exited during start-up ({status}); last log lines from {log}:\n{tail}")]
    ComponentExited {
        component: String,
        status: String,
        log: PathBuf,
        tail: String,
    },

    #[error("timed out after {seconds}s waiting for {what}")]
    Timeout { what: String, seconds: u64 },

    #[error("certificate generation failed: {0}")]
    Pki(#[from] rcgen::Error),

    #[error("invalid kubeconfig {path}: {message}")]
    Kubeconfig { path: PathBuf, message: String },

    #[error("Kubernetes API error while {context}: {source}")]
    Kube { context: String, source: kube::Error },

    #[error("bundled CRD {file} does not parse: {message}")]
    Crd { file: &'static str, message: String },

    #[error("the shared test environment failed to start: {0}")]
    Startup(String),

    #[error("no cluster state in {0}; start one with `kfop cluster up --detach`")]
    NotRunning(PathBuf),

    #[error("peer operator {peer}: {message}")]
    Peer { peer: String, message: String },
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

    /// A component that exited because another process had bound its port.
    pub(crate) fn is_port_taken(&self) -> bool {
        matches!(self, Self::ComponentExited { tail, .. }
            if tail.to_lowercase().contains("address already in use"))
    }
}

#[cfg(test)]
mod tests {
    use super::Error;

    fn exited(tail: &str) -> Error {
        Error::ComponentExited {
            component: "kube-scheduler".into(),
            status: "exit status: 1".into(),
            log: "kube-scheduler.log".into(),
            tail: tail.into(),
        }
    }

    #[test]
    fn only_a_bind_to_a_taken_port_counts_as_a_port_taken() {
        let taken = exited(
            "\"command failed\" err=\"failed to create listener: failed to listen on 127.0.0.1:39815: \
             listen tcp 127.0.0.1:39815: bind: address already in use\"",
        );
        assert!(taken.is_port_taken());
        // PostgreSQL's wording.
        assert!(
            exited("LOG:  could not bind IPv4 address \"127.0.0.1\": Address already in use").is_port_taken()
        );
        assert!(!exited("unknown flag: --bogus").is_port_taken());
        assert!(!Error::Startup("address already in use".into()).is_port_taken());
    }
}
