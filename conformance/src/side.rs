//! One operator's namespace: what [`crate::drive`] acts on and [`crate::snapshot`] reads.
use kube::Client;

/// One operator's namespace.
#[derive(Clone)]
pub struct Side {
    pub client: Client,
    pub namespace: String,
}

// kube's Client is not Debug.
impl std::fmt::Debug for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Side")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}
