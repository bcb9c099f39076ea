//! The all-in-one operator's pieces: which kinds to run, their CRDs, the install manifests, and
//! the sample jobs the demo (`examples/demo`), the tests and the benchmark submit.
use std::collections::BTreeSet;

use futures::FutureExt;
use kfop_runtime::dynamic::LoaderConfig;
use kfop_runtime::manager::Manager;

pub mod adopt;
pub mod check;
pub mod crds;
pub mod deploy;
pub mod samples;
pub mod schemes;
pub mod storage;

use kfop_runtime::LoadError;
use schemes::{FrameworkConfig, Scheme};

/// The all-in-one operator's flags: the engine's, and those of the bundled frameworks.
#[derive(Debug, Clone, clap::Args)]
pub struct Flags {
    #[command(flatten)]
    pub operator: kfop_runtime::operator::OperatorArgs,
    #[command(flatten)]
    pub frameworks: FrameworkConfig,
    /// Serve job kinds registered at run time by Framework resources (kfop.dev/v1alpha1):
    /// install their CRDs (RBAC: the optional kfop-operator-runtime-frameworks ClusterRole) and
    /// run their controllers; `false` refuses every Framework with a condition saying so
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub runtime_frameworks: bool,
}

/// Registers the controllers of the enabled kinds, their code configured by `config`.
pub fn register(
    manager: Manager,
    enabled: &BTreeSet<Scheme>,
    config: &FrameworkConfig,
) -> Result<Manager, LoadError> {
    enabled
        .iter()
        .try_fold(manager, |manager, scheme| scheme.register(manager, config))
}

/// Adds the loader of run-time frameworks (`Framework` resources), enabled or refusing as
/// `enabled` says.
pub fn load_frameworks(manager: Manager, enabled: bool) -> Manager {
    let config = LoaderConfig {
        enabled,
        // No Framework may take over a bundled kind, enabled or not.
        compiled: Scheme::ALL
            .iter()
            .filter_map(|(_, s)| s.crd_without_conversion().metadata.name)
            .collect(),
    };
    manager.on_start(move |registry| kfop_runtime::dynamic::run_loader(registry, config).boxed())
}

/// A command's output proper, to stdout (logs go to stderr).
pub fn say(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout(), "{text}");
}
