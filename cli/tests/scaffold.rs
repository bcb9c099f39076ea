#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `kfop new` output and `--help` texts as snapshots; `kfop gen` idempotence, drift detection,
//! hand-edit refusal, retired-file removal and user-file safety. (Building and running a
//! scaffold is in the workspace's end-to-end tests.)
use std::path::Path;

use clap::CommandFactory;
use kfop::cli::Cli;
use kfop::commands::codegen::{CodegenError, GenArgs, NewArgs, gen_crate, new};

fn new_args(dir: &Path, extra: &[&str]) -> NewArgs {
    let mut argv = vec!["new", "--framework", "foo", "--no-crd", "--dir"];
    argv.push(dir.to_str().unwrap());
    if !extra.contains(&"--kfop-source") {
        argv.extend(["--kfop-source", "path=/kfop"]);
    }
    argv.extend_from_slice(extra);
    parse_sub(&argv)
}

fn gen_args(dir: &Path, extra: &[&str]) -> GenArgs {
    let mut argv = vec!["gen", "--no-crd", "--dir"];
    argv.push(dir.to_str().unwrap());
    argv.extend_from_slice(extra);
    parse_sub(&argv)
}

fn parse_sub<T: clap::FromArgMatches>(argv: &[&str]) -> T {
    let matches = Cli::command()
        .try_get_matches_from(std::iter::once("kfop").chain(argv.iter().copied()))
        .unwrap();
    let (_, sub) = matches.subcommand().unwrap();
    T::from_arg_matches(sub).unwrap()
}

/// Every file under `dir` as `== path ==` and its contents, sorted by path.
fn tree(dir: &Path) -> String {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, root, out);
            } else {
                let rel = path.strip_prefix(root).unwrap().display().to_string();
                let contents = if rel == "Cargo.lock" {
                    // A copy of kfop's own lock: it changes with every dependency, not with `new`.
                    let lock = std::fs::read_to_string(root.join(&rel)).unwrap();
                    let ours =
                        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.lock"));
                    assert_eq!(Some(&lock), ours.as_ref().ok(), "Cargo.lock is not kfop's");
                    "(kfop's Cargo.lock)\n".to_owned()
                } else {
                    std::fs::read_to_string(&path).unwrap()
                };
                out.push((rel, contents));
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, dir, &mut files);
    files.sort();
    files.iter().map(|(p, c)| format!("== {p} ==\n{c}")).collect()
}

fn scaffold() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    new(&new_args(tmp.path(), &[])).unwrap();
    tmp
}

#[test]
fn new_writes_the_whole_crate() {
    let tmp = scaffold();
    insta::assert_snapshot!("new_foo", tree(tmp.path()));
}

#[test]
fn new_refuses_a_non_empty_directory() {
    let tmp = scaffold();
    let err = new(&new_args(tmp.path(), &[])).unwrap_err();
    assert!(matches!(err, CodegenError::DirNotEmpty(_)), "{err}");
    assert!(err.to_string().contains("--force"));
    new(&new_args(tmp.path(), &["--force"])).unwrap();
}

#[test]
fn gen_is_idempotent_and_check_passes() {
    let tmp = scaffold();
    let before = tree(tmp.path());
    for _ in 0..2 {
        let report = gen_crate(&gen_args(tmp.path(), &[])).unwrap();
        assert!(
            report.written.is_empty() && report.removed.is_empty(),
            "{report:?}"
        );
    }
    assert_eq!(tree(tmp.path()), before);
    gen_crate(&gen_args(tmp.path(), &["--check"])).unwrap();
}

#[test]
fn check_fails_after_a_manifest_edit_and_passes_after_gen() {
    let tmp = scaffold();
    let manifest = tmp.path().join("kfop.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let edited = text.replace(
        "  status:",
        "    - name: EXTRA\n      value: \"{job}\"\n  status:",
    );
    std::fs::write(&manifest, &edited).unwrap();
    let err = gen_crate(&gen_args(tmp.path(), &["--check"])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "stale generated files (run `kfop gen`): src/generated/framework.rs, tests/operator.rs"
    );
    let report = gen_crate(&gen_args(tmp.path(), &[])).unwrap();
    assert_eq!(
        report.written,
        ["src/generated/framework.rs", "tests/operator.rs"]
    );
    gen_crate(&gen_args(tmp.path(), &["--check"])).unwrap();
    // The generated code embeds the manifest and checks, at build time, that it is the one
    // `gen` validated.
    let fingerprint = format!("0x{:016x}", kfop_runtime::manifest::fingerprint(&edited));
    assert!(
        std::fs::read_to_string(tmp.path().join("src/generated/framework.rs"))
            .unwrap()
            .contains(&fingerprint)
    );
}

#[test]
fn hand_edited_generated_files_are_not_clobbered() {
    let tmp = scaffold();
    let api = tmp.path().join("src/generated/api.rs");
    std::fs::write(&api, std::fs::read_to_string(&api).unwrap() + "// my change\n").unwrap();
    let manifest = tmp.path().join("kfop.yaml");
    std::fs::write(
        &manifest,
        std::fs::read_to_string(&manifest)
            .unwrap()
            .replace("version: v1", "version: v2"),
    )
    .unwrap();
    let err = gen_crate(&gen_args(tmp.path(), &[])).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("refusing to overwrite hand-edited generated files: src/generated/api.rs;"),
        "{err}"
    );
    assert!(std::fs::read_to_string(&api).unwrap().ends_with("// my change\n"));
    gen_crate(&gen_args(tmp.path(), &["--force"])).unwrap();
    let api_text = std::fs::read_to_string(&api).unwrap();
    assert!(!api_text.contains("my change") && api_text.contains("version = \"v2\""));
}

#[test]
fn user_files_are_never_touched_and_retired_files_are_removed() {
    let tmp = scaffold();
    let lib = tmp.path().join("src/lib.rs");
    std::fs::write(&lib, "// all mine\n").unwrap();
    std::fs::remove_file(tmp.path().join("src/spec.rs")).unwrap();
    // A file an older kfop generated and this one no longer does.
    let retired = "src/old.rs";
    std::fs::write(tmp.path().join(retired), "// @generated old\n").unwrap();
    let lock_path = tmp.path().join("kfop.lock");
    let mut lock = kfop::generate::Lock::parse(&std::fs::read_to_string(&lock_path).unwrap()).unwrap();
    lock.files
        .insert(retired.into(), kfop::generate::sha256("// @generated old\n"));
    std::fs::write(&lock_path, lock.to_text()).unwrap();

    let err = gen_crate(&gen_args(tmp.path(), &["--check"])).unwrap_err();
    assert!(
        err.to_string().contains("src/old.rs (no longer generated)"),
        "{err}"
    );
    let report = gen_crate(&gen_args(tmp.path(), &[])).unwrap();
    assert_eq!(report.removed, [retired]);
    assert!(!tmp.path().join(retired).exists());
    assert_eq!(std::fs::read_to_string(&lib).unwrap(), "// all mine\n");
    assert!(
        std::fs::read_to_string(tmp.path().join("src/spec.rs"))
            .unwrap()
            .contains("pub struct FooJobExtra"),
        "gen recreates a missing user file"
    );
}

#[test]
fn help_texts() {
    let mut cmd = Cli::command();
    cmd.build();
    let top = cmd.render_help().to_string();
    let new_help = cmd.find_subcommand_mut("new").unwrap().render_help().to_string();
    let gen_help = cmd.find_subcommand_mut("gen").unwrap().render_help().to_string();
    let apply_help = cmd
        .find_subcommand_mut("apply")
        .unwrap()
        .render_help()
        .to_string();
    let cluster_help = cmd
        .find_subcommand_mut("cluster")
        .unwrap()
        .render_help()
        .to_string();
    insta::assert_snapshot!("help_kfop", top);
    insta::assert_snapshot!("help_new", new_help);
    insta::assert_snapshot!("help_gen", gen_help);
    insta::assert_snapshot!("help_apply", apply_help);
    insta::assert_snapshot!("help_cluster", cluster_help);
}

#[test]
fn bad_framework_names_and_mismatched_manifests() {
    let tmp = tempfile::tempdir().unwrap();
    let err = new(&parse_sub(&[
        "new",
        "--framework",
        "Foo_Bar",
        "--no-crd",
        "--dir",
        tmp.path().to_str().unwrap(),
    ]))
    .unwrap_err();
    assert!(
        err.to_string().contains("`Foo_Bar` is not a framework name"),
        "{err}"
    );
    let manifest = tmp.path().join("other.yaml");
    std::fs::write(
        &manifest,
        kfop::manifest::default_manifest("bar", "bar.example.com"),
    )
    .unwrap();
    let dir = tmp.path().join("x");
    let err = new(&parse_sub(&[
        "new",
        "--framework",
        "foo",
        "--no-crd",
        "--manifest",
        manifest.to_str().unwrap(),
        "--dir",
        dir.to_str().unwrap(),
    ]))
    .unwrap_err();
    assert!(
        err.to_string().contains("does not match metadata.name `bar`"),
        "{err}"
    );
}

#[test]
fn owned_resources_and_hooks_are_manifest_data() {
    let tmp = scaffold();
    let read = |p: &str| std::fs::read_to_string(tmp.path().join(p)).unwrap();
    // A manifest-only framework has no Rust of its own beyond the scaffolded spec.
    assert!(!tmp.path().join("src/hooks.rs").exists());
    assert!(read("src/generated/framework.rs").contains("impl kfop_runtime::Framework for Foo {"));
    let lib = read("src/lib.rs");
    // Turning on owned objects and hooks later is a manifest edit and `kfop gen`.
    let manifest = tmp.path().join("kfop.yaml");
    let text = read("kfop.yaml").replace("spec:\n", "spec:\n  resources: [configmaps]\n  hooks: true\n");
    std::fs::write(&manifest, text).unwrap();
    gen_crate(&gen_args(tmp.path(), &[])).unwrap();
    assert!(read("src/hooks.rs").contains("impl Framework for Foo {"));
    let framework = read("src/generated/framework.rs");
    // The data stays in kfop.yaml: the generated code embeds it, fingerprinted.
    assert!(
        framework.contains("include_str!(\"../../kfop.yaml\")") && !framework.contains("ConfigMap"),
        "{framework}"
    );
    assert!(!framework.contains("impl kfop_runtime::Framework for Foo"));
    assert!(read("src/generated/mod.rs").contains("#[path = \"../hooks.rs\"]"));
    assert!(read("deploy/rbac.yaml").contains("configmaps"));
    assert_eq!(read("src/lib.rs"), lib, "the user's lib.rs is not touched");
}

#[test]
fn files_an_older_kfop_generated_are_handed_over_unless_edited() {
    let tmp = scaffold();
    let old = "// @generated by an older kfop\npub mod api;\n";
    let lock_path = tmp.path().join("kfop.lock");
    let mut lock = kfop::generate::Lock::parse(&std::fs::read_to_string(&lock_path).unwrap()).unwrap();
    for path in ["src/lib.rs", "src/main.rs"] {
        std::fs::write(tmp.path().join(path), old).unwrap();
        lock.files.insert(path.into(), kfop::generate::sha256(old));
    }
    std::fs::write(&lock_path, lock.to_text()).unwrap();
    std::fs::write(tmp.path().join("src/main.rs"), "fn main() {} // mine now\n").unwrap();
    gen_crate(&gen_args(tmp.path(), &[])).unwrap();
    let lib = std::fs::read_to_string(tmp.path().join("src/lib.rs")).unwrap();
    assert!(
        lib.contains("mod generated;") && lib.contains("This file is yours"),
        "{lib}"
    );
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("src/main.rs")).unwrap(),
        "fn main() {} // mine now\n"
    );
}

/// The `[dependencies]` and `[dev-dependencies]` lines of a Cargo.toml (not its patch section).
fn dependency_lines(cargo_toml: &str) -> Vec<&str> {
    cargo_toml
        .split("\n[")
        .filter(|section| section.starts_with("dependencies]") || section.starts_with("dev-dependencies]"))
        .flat_map(|section| section.lines().skip(1))
        .filter(|line| line.starts_with("kfop-"))
        .collect()
}

/// `kfop` as a user runs it, from a directory outside the checkout.
fn run_kfop(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_kfop"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn a_kfop_built_from_a_checkout_scaffolds_against_it_by_default() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run_kfop(tmp.path(), &["new", "--framework", "bar", "--no-crd"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let cargo_toml = std::fs::read_to_string(tmp.path().join("bar-operator/Cargo.toml")).unwrap();
    for line in dependency_lines(&cargo_toml) {
        assert!(!line.contains("path"), "{line}");
    }
    // Every kfop crate the build pulls in, kfop-runtime's own dependencies included.
    let checkout = std::fs::canonicalize(Path::new(env!("CARGO_MANIFEST_DIR")).join("..")).unwrap();
    let patch = cargo_toml.split("[patch.crates-io]\n").nth(1).unwrap();
    assert_eq!(
        patch.trim_end(),
        [
            ("kfop-runtime", "runtime"),
            ("kfop-derive", "derive"),
            ("kfop-crd-rules", "crd-rules"),
            ("kfop-testenv", "testenv")
        ]
        .map(|(c, folder)| format!("{c} = {{ path = \"{}/{folder}\" }}", checkout.display()))
        .join("\n")
    );
}

#[test]
fn an_installed_kfop_scaffolds_against_the_registry_from_anywhere() {
    // `registry` is what an installed kfop (no checkout) picks by itself; the workspace's
    // tests/scaffold.rs installs one and builds its scaffold.
    let tmp = tempfile::tempdir().unwrap();
    let out = run_kfop(
        tmp.path(),
        &[
            "new",
            "--framework",
            "bar",
            "--no-crd",
            "--kfop-source",
            "registry",
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let dir = tmp.path().join("bar-operator");
    let cargo_toml = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let deps = dependency_lines(&cargo_toml);
    assert_eq!(deps.len(), 3, "{cargo_toml}");
    for line in deps {
        assert!(
            line.contains("version = \"0.1\"") && !line.contains("path"),
            "{line}"
        );
    }
    assert!(!cargo_toml.contains("[patch"), "{cargo_toml}");
    let manifest = std::fs::read_to_string(dir.join("kfop.yaml")).unwrap();
    assert!(manifest.contains("group: bar.example.com"), "{manifest}");
    for file in [
        "src/lib.rs",
        "src/generated/framework.rs",
        "tests/operator.rs",
        "deploy/rbac.yaml",
        "README.md",
        "Cargo.lock",
    ] {
        assert!(dir.join(file).is_file(), "{file}");
    }
}

#[test]
fn kfop_crates_missing_from_the_registry_are_one_line_naming_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    // Offline, cargo answers from its local index cache, which has no kfop crate: the same
    // answer as the registry before kfop is published, with no network.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kfop"))
        .args(["new", "--framework", "bar", "--kfop-source", "registry"])
        .current_dir(tmp.path())
        .env("CARGO_NET_OFFLINE", "true")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "kfop: kfop-runtime {} is not on the crate registry: pass --kfop-source \
             path=<a kfop checkout> or git=<url>\n",
            env!("CARGO_PKG_VERSION")
        )
    );
    assert!(
        !tmp.path().join("bar-operator").exists(),
        "the failed scaffold is not left in the way of the rerun"
    );
}

#[test]
fn checkout_and_git_sources_are_one_patch_section_and_members_use_paths() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("op");
    new(&new_args(
        &dir,
        &["--kfop-source", "git=https://example.invalid/kfop.git"],
    ))
    .unwrap();
    let cargo_toml = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(
        dependency_lines(&cargo_toml).iter().all(|l| !l.contains("path")),
        "{cargo_toml}"
    );
    let patch = cargo_toml.split("[patch.crates-io]\n").nth(1).unwrap();
    assert_eq!(
        patch.trim_end(),
        ["kfop-runtime", "kfop-derive", "kfop-crd-rules", "kfop-testenv"]
            .map(|c| format!("{c} = {{ git = \"https://example.invalid/kfop.git\" }}"))
            .join("\n")
    );

    // Inside a kfop checkout the crate is a workspace member: relative paths, no patch.
    let checkout = tmp.path().join("kfop");
    let member = checkout.join("examples/baz");
    std::fs::create_dir_all(&member).unwrap();
    let source = format!("path={}", checkout.display());
    new(&new_args(&member, &["--force", "--kfop-source", &source])).unwrap();
    let cargo_toml = std::fs::read_to_string(member.join("Cargo.toml")).unwrap();
    assert!(
        cargo_toml.contains(
            "kfop-runtime = { version = \"0.1\", path = \"../../runtime\", features = [\"v1_37\"] }"
        ),
        "{cargo_toml}"
    );
    assert!(!cargo_toml.contains("[patch"), "{cargo_toml}");

    let bad =
        Cli::command().try_get_matches_from(["kfop", "new", "--framework", "foo", "--kfop-source", "crates"]);
    assert!(
        bad.unwrap_err()
            .to_string()
            .contains("use `auto`, `registry`, `path=DIR` (a kfop checkout) or `git=URL`")
    );
}
