// Scaffolded by kfop 0.1.0. This file is yours: `kfop gen` never changes it.
//! The MPIJob operator: `mpi-operator` runs it, `mpi-operator crd` prints its CRD.
fn main() -> std::process::ExitCode {
    kfop_runtime::operator::main(mpi_operator::framework(Default::default()))
}
