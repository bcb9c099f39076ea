// Scaffolded by kfop 0.1.0. This file is yours: `kfop gen` never changes it.
//! The JAXJob operator: `jax-operator` runs it, `jax-operator crd` prints its CRD.
fn main() -> std::process::ExitCode {
    kfop_runtime::operator::main(jax_operator::framework(Default::default()))
}
