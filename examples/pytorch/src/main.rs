// Scaffolded by kfop 0.1.0. This file is yours: `kfop gen` never changes it.
//! The PyTorchJob operator: `pytorch-operator` runs it, `pytorch-operator crd` prints its CRD.
fn main() -> std::process::ExitCode {
    kfop_runtime::operator::main(pytorch_operator::framework(Default::default()))
}
