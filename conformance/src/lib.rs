//! kfop-conformance: tests that hold kfop to Kubeflow's behaviour. Kubeflow's own operators
//! (training-operator, later mpi-operator) are built from their Go modules and run out of cluster
//! as peers on the local control plane (`kfop_testenv::Peer`), and serve as the oracle: what
//! they create and report for a job is what kfop must create and report.
//!
//! The crate's code lives in its tests for now (`tests/`); shared comparison helpers will move
//! here.
