//! kfop-runtime: the engine every kfop training-job operator calls into.
//!
//! It re-exports `kube`, `k8s_openapi` and `schemars` so an operator needs this one dependency.

pub use k8s_openapi;
pub use kube;
pub use schemars;
