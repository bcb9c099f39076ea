#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The binary's subcommands as a user runs them (the demo is `kfop-demo`, `examples/demo`).
use std::process::Command;

fn operator(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kfop-operator"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn enable_scheme_selects_kinds_case_insensitively() {
    let out = operator(&["crds", "--enable-scheme", "TFJob", "--enable-scheme", "jaxjob"]);
    assert!(out.status.success());
    let yaml = String::from_utf8_lossy(&out.stdout);
    assert!(yaml.contains("name: tfjobs.kubeflow.org") && yaml.contains("name: jaxjobs.kubeflow.org"));
    assert!(!yaml.contains("pytorchjobs"), "{yaml}");

    let out = operator(&["crds", "--enable-scheme", "MPIJob"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("name: mpijobs.kubeflow.org"));

    let out = operator(&["crds", "--enable-scheme", "mpi"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--enable-scheme: unknown kind `mpi`"));
}
