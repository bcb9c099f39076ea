{{ header }}
#![allow(clippy::unwrap_used)]
//! `deploy/crd.yaml` is what the types generate; `KFOP_BLESS=1 cargo test --test crd` rewrites it.
use kfop_runtime::kube::CustomResourceExt;
use {{ m.crate_ident() }}::{{ m.kind }};

#[test]
fn committed_crd_is_current() {
    let yaml = kfop_runtime::crd_yaml(&{{ m.kind }}::crd()).unwrap();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/crd.yaml");
    if std::env::var_os("KFOP_BLESS").is_some() {
        std::fs::write(&path, &yaml).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(committed == yaml, "deploy/crd.yaml is stale; run `cargo run -- crd > deploy/crd.yaml` (or kfop gen)");
}
