// Scaffolded by kfop 0.1.0. This file is yours: `kfop gen` never changes it.
//! The PyTorchJob operator as a library: the API types and the framework kfop generates from
//! `kfop.yaml` (`src/generated/`), and the elastic job's autoscaler.
pub mod elastic;
mod generated;

pub use generated::*;
