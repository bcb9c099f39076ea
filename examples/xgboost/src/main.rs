// Scaffolded by kfop 0.1.0. This file is yours: `kfop gen` never changes it.
//! The XGBoostJob operator: `xgboost-operator` runs it, `xgboost-operator crd` prints its CRD.
fn main() -> std::process::ExitCode {
    kfop_runtime::operator::main(xgboost_operator::framework(Default::default()))
}
