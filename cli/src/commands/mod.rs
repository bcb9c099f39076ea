pub mod apply;
pub mod cluster;
pub mod codegen;
pub mod katib;
