// Scaffolded by kfop 0.1.0. This file is yours: `kfop gen` never changes it.
//! The MXJob operator: `mxnet-operator` runs it, `mxnet-operator crd` prints its CRD.
fn main() -> std::process::ExitCode {
    kfop_runtime::operator::main(mxnet_operator::framework(Default::default()))
}
