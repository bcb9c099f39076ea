// Scaffolded by kfop 0.1.0. This file is yours: `kfop gen` never changes it.
//! The TFJob operator: `tensorflow-operator` runs it, `tensorflow-operator crd` prints its CRD.
fn main() -> std::process::ExitCode {
    kfop_runtime::operator::main(tensorflow_operator::framework(
        tensorflow_operator::Tensorflow::default(),
    ))
}
