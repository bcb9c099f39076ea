#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `kfop new --framework foo --kfop-source path=<this checkout>` into a temporary directory, the
//! crate moved elsewhere, then `cargo test` there: the scaffold builds without edits wherever it
//! lives (its kfop crates come through one `[patch.crates-io]` section, never a path in its
//! dependencies), its CRD is current, and its own integration test runs the operator on the local
//! control plane (a FooJob with 1 master and 2 workers gets the manifest's environment and
//! succeeds when its pods do).
use std::path::{Path, PathBuf};
use std::time::Instant;

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// The workspace's build directory, shared so only the scaffold itself compiles.
fn target() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| workspace().join("target"), Into::into)
}

fn cargo(dir: &Path, args: &[&str]) -> std::process::Output {
    kfop_testenv::cargo::command()
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target())
        .output()
        .unwrap()
}

#[test]
fn new_framework_builds_and_its_job_succeeds() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("foo-operator");
    let started = Instant::now();
    let out = cargo(
        workspace(),
        &[
            "run",
            "--quiet",
            "-p",
            "kfop",
            "--",
            "new",
            "--framework",
            "foo",
            "--dir",
            dir.to_str().unwrap(),
            "--kfop-source",
            &format!("path={}", workspace().display()),
        ],
    );
    assert!(
        out.status.success(),
        "kfop new failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!(
        "kfop new, including the build that writes deploy/crd.yaml: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        std::fs::read_to_string(dir.join("deploy/crd.yaml"))
            .unwrap()
            .contains("name: foojobs.foo.example.com")
    );
    let cargo_toml = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let (dependencies, patch) = cargo_toml.split_once("[patch.crates-io]").unwrap();
    assert!(!dependencies.contains("path ="), "{cargo_toml}");
    // Every kfop crate the build pulls in, kfop-runtime's own dependencies included.
    for krate in ["kfop-runtime", "kfop-derive", "kfop-crd-rules", "kfop-testenv"] {
        assert!(
            patch.contains(&format!("{krate} = {{ path = ")),
            "{krate}: {cargo_toml}"
        );
    }
    assert_eq!(patch.matches("path =").count(), 4, "{cargo_toml}");

    // Somewhere else entirely: nothing in the crate points back at where it was made.
    let moved = tmp.path().join("elsewhere/renamed");
    std::fs::create_dir_all(moved.parent().unwrap()).unwrap();
    std::fs::rename(&dir, &moved).unwrap();
    let dir = moved;

    let out = cargo(&dir, &["test"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "scaffold tests failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("test a_job_gets_its_pods_and_succeeds ... ok"),
        "{stdout}"
    );
    assert!(
        stdout.contains("test committed_crd_is_current ... ok"),
        "{stdout}"
    );

    // `kfop gen` on the fresh scaffold changes nothing.
    let out = cargo(
        workspace(),
        &[
            "run",
            "--quiet",
            "-p",
            "kfop",
            "--",
            "gen",
            "--check",
            "--dir",
            dir.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "gen --check:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The manifest grows owned objects and hooks later: `kfop gen` alone keeps the crate whole.
    let manifest = dir.join("kfop.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace("spec:\n", "spec:\n  resources: [configmaps]\n  hooks: true\n"),
    )
    .unwrap();
    let out = cargo(
        workspace(),
        &[
            "run",
            "--quiet",
            "-p",
            "kfop",
            "--",
            "gen",
            "--dir",
            dir.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "gen after adding resources and hooks:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        std::fs::read_to_string(dir.join("src/hooks.rs"))
            .unwrap()
            .contains("impl Hooks for Foo")
    );
    assert!(
        std::fs::read_to_string(dir.join("deploy/rbac.yaml"))
            .unwrap()
            .contains("configmaps")
    );
    let out = cargo(&dir, &["test"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "scaffold tests after adding resources and hooks failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("test a_job_gets_its_pods_and_succeeds ... ok"),
        "{stdout}"
    );
}
