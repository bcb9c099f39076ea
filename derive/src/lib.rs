//! kfop-derive: turns an annotated spec struct into CRD types and the glue into kfop-runtime.
//!
//! The macro lands with the runtime's framework trait; until then the crate only reserves its
//! place in the workspace.
