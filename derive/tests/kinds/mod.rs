//! The example kinds shared by the tests (also the inputs of the expansion snapshots).
pub mod pytorchjob;
pub mod tfjob;
