// Scaffolded by kfop 0.1.0. This file is yours: `kfop gen` never changes it.
//! The PaddleJob operator: `paddle-operator` runs it, `paddle-operator crd` prints its CRD.
fn main() -> std::process::ExitCode {
    kfop_runtime::operator::main(paddle_operator::framework(Default::default()))
}
