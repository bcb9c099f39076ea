//! Frameworks registered at run time: a `Framework` resource holding a `kfop.yaml` becomes a job
//! kind (its CRD installed from the manifest) and a controller started inside the running
//! operator on its shared client, caches and watches, with no Rust and no rebuild.
mod crd;
mod framework;
mod job;
mod loader;
mod resource;

pub use crd::{FRAMEWORK_LABEL, crd};
pub use framework::{NoCode, RuntimeLoadError, load};
pub use job::{JobKind, RuntimeJob, RuntimeJobSpec};
pub use loader::{LoaderConfig, SERVED_ANNOTATION, run as run_loader};
pub use resource::{Framework, FrameworkCondition, FrameworkSpec, FrameworkStatus, REMOVE_CRD_ANNOTATION};

/// Why the Framework loader stopped.
#[derive(Debug, thiserror::Error)]
pub enum DynamicError {
    #[error("the Framework CRD (frameworks.kfop.dev) is not installed: {0}")]
    FrameworkCrdMissing(#[source] kube::Error),
}
