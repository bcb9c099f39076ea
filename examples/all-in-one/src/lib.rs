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
pub fn register(mut manager: Manager, enabled: &BTreeSet<Scheme>) -> Manager {
    for scheme in enabled {
        manager = match scheme {
            Scheme::TfJob => manager.register(tensorflow_operator::Tensorflow),
            Scheme::PyTorchJob => manager.register(pytorch_operator::Pytorch),
            Scheme::XgBoostJob => manager.register(xgboost_operator::Xgboost),
            Scheme::PaddleJob => manager.register(paddle_operator::Paddle),
            Scheme::JaxJob => manager.register(jax_operator::Jax),
            Scheme::MxJob => manager.register(mxnet_operator::Mxnet),
            Scheme::MpiJob => manager.register(mpi_operator::Mpi),
        };
    }
    manager
}

/// A command's output proper, to stdout (logs go to stderr).
pub fn say(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout(), "{text}");
}
