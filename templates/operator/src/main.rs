{{ header }}
//! The {{ m.kind }} operator: `{{ m.crate_name() }}` runs it, `{{ m.crate_name() }} crd` prints its CRD.
fn main() -> std::process::ExitCode {
    kfop_runtime::operator::main({{ m.crate_ident() }}::framework(Default::default()))
}
