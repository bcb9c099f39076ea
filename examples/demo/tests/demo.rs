#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The README's main command as a user runs it: `kfop-demo` starts a local control plane, runs
//! every kind in one process and drives one sample job per kind to Succeeded.
use std::process::Command;

fn demo(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kfop-demo"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn demo_runs_every_sample_to_success() {
    let out = demo(&["--train-seconds", "1"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for job in [
        "TFJob/tf-dist-mnist",
        "PyTorchJob/pytorch-simple",
        "XGBoostJob/xgboost-dist-iris",
        "PaddleJob/paddle-simple-cpu",
        "JAXJob/jaxjob-simple",
        "MXJob/mxnet-job",
        "MPIJob/pi",
    ] {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(job) && l.ends_with("Succeeded")),
            "{job}:\n{stdout}"
        );
    }
    assert!(stdout.contains("all 7 jobs Succeeded"), "{stdout}");
}

#[test]
fn an_unknown_enable_scheme_is_a_usage_error() {
    let out = demo(&["--enable-scheme", "mpi"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--enable-scheme: unknown kind `mpi`"));
}
