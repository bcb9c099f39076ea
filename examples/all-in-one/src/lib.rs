//! The all-in-one operator's pieces: which kinds to run, their CRDs, the install manifests, and
//! the sample jobs the demo (`examples/demo`), the tests and the benchmark submit.
use std::collections::BTreeSet;

use kfop_runtime::manager::Manager;

pub mod crds;
pub mod deploy;
pub mod samples;
pub mod schemes;

use schemes::Scheme;

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
