#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! What the benchmark's tests share.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The operator binary of this build (`cargo test --workspace` builds it for its own tests).
fn operator_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let target = exe
        .ancestors()
        .find(|dir| dir.file_name().is_some_and(|n| n == "target"))
        .unwrap()
        .to_path_buf();
    ["debug", "release"]
        .iter()
        .map(|profile| target.join(profile).join("kfop-operator"))
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!(
                "no kfop-operator under {}: run `cargo build -p kfop-operator`",
                target.display()
            )
        })
}

/// Runs `kfop-bench` with `args`, its results in `results`, against this build's operator.
// Each test binary compiles this module; one that sets an environment uses only the next.
#[allow(dead_code)]
pub fn bench(args: &[&str], results: &Path) -> Output {
    bench_with_env(args, results, &[])
}

/// [`bench`] with `env` set for it and the operators it starts.
pub fn bench_with_env(args: &[&str], results: &Path, env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kfop-bench"))
        .envs(env.iter().copied())
        .args(args)
        .arg("--results")
        .arg(results)
        .arg("--operator-bin")
        .arg(operator_bin())
        .output()
        .unwrap()
}
