// Scaffolded by kfop 0.1.0. This file is yours: `kfop gen` never changes it.
//! The XGBoostJob operator as a library: the API types and the framework kfop generates from
//! `kfop.yaml` (`src/generated/`). Add your own modules here.
mod generated;

pub use generated::*;
