{{ header }}
//! The {{ m.kind }} operator as a library: the API types and the framework kfop generates from
//! `kfop.yaml` (`src/generated/`). Add your own modules here.
mod generated;

pub use generated::*;
