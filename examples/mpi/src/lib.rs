// Scaffolded by kfop 0.1.0. This file is yours: `kfop gen` never changes it.
//! The MPIJob operator as a library: the API types and the framework kfop generates from
//! `kfop.yaml` (`src/generated/`), the objects a job owns and its status.
mod generated;
pub mod objects;
pub mod status;

pub use generated::*;
