//! The all-in-one operator's pieces: which kinds to run, their CRDs, the install manifests, and
//! the sample jobs the demo (`examples/demo`), the tests and the benchmark submit.
use std::collections::BTreeSet;

use kfop_runtime::manager::Manager;

pub mod crds;
pub mod deploy;
pub mod samples;
pub mod schemes;

use schemes::Scheme;

/// The all-in-one operator's flags: the engine's, and those of the bundled frameworks.
#[derive(Debug, Clone, clap::Args)]
pub struct Flags {
    #[command(flatten)]
    pub operator: kfop_runtime::operator::OperatorArgs,
    /// Image of the kubectl-delivery init container of a v1 MPIJob's launcher, which copies
    /// kubectl in for kubexec.sh (training-operator's flag of the same name)
    #[arg(long, default_value = mpi_operator::v1::DEFAULT_KUBECTL_DELIVERY_IMAGE)]
    pub mpi_kubectl_delivery_image: String,
}

impl Flags {
    /// Hands the frameworks their flags (before any controller starts).
    pub fn configure_frameworks(&self) {
        mpi_operator::v1::set_kubectl_delivery_image(self.mpi_kubectl_delivery_image.clone());
    }
}

/// Registers the controllers of the enabled kinds.
pub fn register(manager: Manager, enabled: &BTreeSet<Scheme>) -> Manager {
    enabled
        .iter()
        .fold(manager, |manager, scheme| scheme.register(manager))
}

/// A command's output proper, to stdout (logs go to stderr).
pub fn say(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout(), "{text}");
}
