//! kfop-testenv: a Rust "envtest". Integration tests (and scaffolded operators' tests) get a real
//! Kubernetes control plane — etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
//! kwok — built from Go modules by `testenv/controlplane/build.sh` and run on loopback.
//!
//! * [`TestEnv::shared`] starts the plane once per test process (or attaches to the cluster named by
//!   `KFOP_TEST_KUBECONFIG`) and hands out clients and per-test namespaces.
//! * [`ControlPlane`] is the plane itself, for tools that manage its lifetime (`kfop cluster up`).
//! * [`crds`] holds third-party CRDs (the gang schedulers' PodGroups) for tests.
//! * [`pods`] drives kwok pods to a chosen end: exit code and restart count.
//! * [`admission`] runs tables of jobs against the API server's admission and prints the messages.

pub mod admission;
mod assets;
mod build_progress;
pub mod cargo;
pub mod crds;
mod env;
mod error;
pub mod imports;
pub mod katib;
mod kubeconfig;
mod kubeflow_cases;
pub mod lifecycle;
mod nodes;
pub mod peer;
mod pki;
mod plane;
pub mod pods;
mod ports;
mod process;
mod version;
pub mod wait;

pub use assets::{Assets, BUILD_COMMAND};
pub use env::{ATTACH_ENV, TestEnv, TestNamespace, install_crds};
pub use error::{Error, Result};
pub use katib::{Katib, KatibOptions};
pub use nodes::NodeShape;
pub use peer::{Peer, PeerBuild, PeerOptions, PeerWebhooks, ensure_namespace};
pub use plane::{ControlPlane, Lifetime, PlaneOptions, PlaneState};
pub use process::set_parent_death_signal;
