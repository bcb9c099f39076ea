pub mod cluster;
pub mod codegen;
