#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::print_stdout)]
//! The kfop command as someone without a kfop checkout gets it: the packaged crates (`cargo
//! package`) stand in for published ones, `kfop` is `cargo install`ed from its package into an
//! empty root, and from a directory outside the checkout it scaffolds with no flags, regenerates,
//! starts a local plane (`kfop cluster up`, from kfop-testenv's packaged recipe), applies a
//! manifest-only framework to the all-in-one operator (`kfop apply`), and the scaffold's own
//! tests run its operator on that plane: a FooJob with 1 master and 2 workers gets the
//! manifest's environment and succeeds when its pods do. Before the crates are "published" the
//! same `kfop new` fails with one line naming the flag to pass.
//!
//! "Published" is a `[patch.crates-io]` in a `.cargo/config.toml` above the scaffold, naming the
//! unpacked packages, so the scaffold's own Cargo.toml is exactly what a registry user gets.
use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use kfop_runtime::dynamic::Framework;
use kfop_runtime::kube::config::{KubeConfigOptions, Kubeconfig};
use kfop_runtime::kube::{Client, Config, CustomResourceExt};
use kfop_runtime::testing::Operator;

const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The crates a scaffold depends on, directly or through kfop-runtime.
const LIBRARIES: [&str; 4] = ["kfop-crd-rules", "kfop-derive", "kfop-testenv", "kfop-runtime"];

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// The workspace's build directory, shared so that dependencies compile once.
fn target() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| workspace().join("target"), Into::into)
}

/// `cargo` in `dir`, building in the workspace's build directory.
fn cargo(dir: &Path, args: &[&str]) -> Output {
    kfop_testenv::cargo::command()
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target())
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn succeeded(what: &str, out: &Output) -> String {
    assert!(
        out.status.success(),
        "{what} failed:\n{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Runs `command`, which must succeed; its stdout.
fn ok(what: &str, command: &mut Command) -> String {
    succeeded(what, &command.output().unwrap())
}

/// Every file under `dir`, relative.
fn files(dir: &Path) -> BTreeSet<PathBuf> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeSet<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, root, out);
            } else {
                out.insert(path.strip_prefix(root).unwrap().to_owned());
            }
        }
    }
    let mut out = BTreeSet::new();
    if dir.is_dir() {
        walk(dir, dir, &mut out);
    }
    out
}

/// Makes `to` hold what `from` holds, writing only files whose contents differ: the packages
/// carry one fixed time stamp for every file, so unpacking over the last run's copy would make
/// cargo rebuild them all, or nothing after a change.
fn sync(from: &Path, to: &Path) {
    let new = files(from);
    for stale in files(to).difference(&new) {
        std::fs::remove_file(to.join(stale)).unwrap();
    }
    for file in &new {
        let contents = std::fs::read(from.join(file)).unwrap();
        let dest = to.join(file);
        if std::fs::read(&dest).ok().as_ref() != Some(&contents) {
            std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
            std::fs::write(&dest, contents).unwrap();
        }
    }
}

fn write_if_changed(path: &Path, contents: &str) {
    if std::fs::read_to_string(path).ok().as_deref() != Some(contents) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
    }
}

/// Packs the crates as `cargo package` does for the registry and unpacks them into a directory
/// outside the checkout whose `.cargo/config.toml` patches the registry's kfop crates to them.
/// The directory is the same on every run for this checkout, so a warm run does not rebuild the
/// kfop crates (only the new scaffold).
fn publish() -> PathBuf {
    // Packed again every time (seconds): packages left from an older tree would test old code.
    let mut pack = vec!["package", "--quiet", "--allow-dirty", "--no-verify"];
    for krate in LIBRARIES.iter().chain(&["kfop"]) {
        pack.extend(["-p", krate]);
    }
    succeeded("cargo package", &cargo(workspace(), &pack));

    let mut hasher = std::hash::DefaultHasher::new();
    workspace().hash(&mut hasher);
    let registry = std::env::temp_dir().join(format!("kfop-published-{:016x}", hasher.finish()));
    std::fs::create_dir_all(&registry).unwrap();
    let staging = tempfile::tempdir_in(&registry).unwrap();
    let unpacked = |krate: &str| format!("{krate}-{VERSION}");
    for krate in LIBRARIES.iter().chain(&["kfop"]) {
        let archive = target()
            .join("package")
            .join(format!("{}.crate", unpacked(krate)));
        let out = Command::new("tar")
            .arg("-xzf")
            .arg(&archive)
            .arg("-C")
            .arg(staging.path())
            .output()
            .unwrap();
        succeeded(&format!("unpacking {}", archive.display()), &out);
    }
    let patch: Vec<String> = LIBRARIES
        .iter()
        .map(|krate| {
            let dir = registry.join("crates").join(unpacked(krate));
            format!("{krate} = {{ path = \"{}\" }}", dir.display())
        })
        .collect();
    write_if_changed(
        &registry.join(".cargo/config.toml"),
        &format!(
            "# kfop's tests/scaffold.rs: its packaged crates, as if published.\n\
             [patch.crates-io]\n{}\n",
            patch.join("\n")
        ),
    );
    for krate in LIBRARIES {
        sync(
            &staging.path().join(unpacked(krate)),
            &registry.join("crates").join(unpacked(krate)),
        );
    }
    // The package's Cargo.lock names the kfop crates as the registry's: `cargo install --locked`
    // would refuse to change it to the patched ones. Updated here (the other versions are kept,
    // as the workspace's), it lets the install reuse the workspace's compiled dependencies.
    let kfop = staging.path().join(unpacked("kfop"));
    let out = cargo(
        staging.path(),
        &[
            "metadata",
            "--format-version",
            "1",
            "--manifest-path",
            kfop.join("Cargo.toml").to_str().unwrap(),
        ],
    );
    succeeded("updating the kfop package's Cargo.lock", &out);
    sync(&kfop, &registry.join("crates").join(unpacked("kfop")));
    registry
}

/// The installed `kfop`, as a user runs it: without the variables cargo sets for this test's
/// crate, its nested builds sharing the workspace's build directory.
fn kfop(bin: &Path, dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(bin);
    let cargo = kfop_testenv::cargo::command();
    for (name, _) in cargo.get_envs().filter(|(_, value)| value.is_none()) {
        command.env_remove(name);
    }
    command
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target());
    command
}

/// Stops the plane `kfop cluster up --detach` left running, also when the test fails.
struct Cluster<'a> {
    bin: &'a Path,
    dir: PathBuf,
}

impl Drop for Cluster<'_> {
    fn drop(&mut self) {
        let down = ["cluster", "down", "--dir", &*self.dir.to_string_lossy()];
        let _ = kfop(self.bin, &std::env::temp_dir(), &down).output();
    }
}

async fn client(kubeconfig: &Path) -> Client {
    let file = Kubeconfig::read_from(kubeconfig).unwrap();
    let config = Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

fn timed(started: &mut Instant, what: &str) {
    println!("{what}: {:.1} s", started.elapsed().as_secs_f64());
    *started = Instant::now();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_installed_kfop_without_a_checkout_scaffolds_builds_and_runs() {
    let mut clock = Instant::now();
    let registry = publish();
    timed(&mut clock, "cargo package and unpack");

    let work = tempfile::tempdir_in(&registry).unwrap();
    let root = work.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let package = registry.join("crates").join(format!("kfop-{VERSION}"));
    // Its own artifact directory, so the installed binary does not replace the workspace's
    // target/debug/kfop; the build directory is the workspace's, where the dependencies are.
    let out = kfop_testenv::cargo::command()
        .args(["install", "--locked", "--debug", "--quiet", "--path"])
        .arg(&package)
        .arg("--root")
        .arg(&root)
        .current_dir(work.path())
        .env("CARGO_TARGET_DIR", work.path().join("install-target"))
        .env("CARGO_BUILD_BUILD_DIR", target())
        // The workspace's dev profile, which a package does not carry.
        .env("CARGO_PROFILE_DEV_DEBUG", "false")
        .output()
        .unwrap();
    succeeded("cargo install", &out);
    let bin = root.join("bin/kfop");
    assert!(bin.is_file(), "{:?}", files(&root));
    timed(&mut clock, "cargo install kfop");

    // Not published yet (outside the patched directory): one line saying what to pass. Offline,
    // cargo answers from its local index cache, which holds no kfop crate.
    let elsewhere = tempfile::tempdir().unwrap();
    let out = kfop(&bin, elsewhere.path(), &["new", "--framework", "baz"])
        .env("CARGO_NET_OFFLINE", "true")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(
        text(&out.stderr),
        format!(
            "kfop: kfop-runtime {VERSION} is not on the crate registry: pass --kfop-source \
             path=<a kfop checkout> or git=<url>\n"
        )
    );
    assert!(!elsewhere.path().join("baz-operator").exists());

    let home = work.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let stdout = ok("kfop new", &mut kfop(&bin, &home, &["new", "--framework", "foo"]));
    assert!(stdout.starts_with("created foo-operator\n"), "{stdout}");
    timed(
        &mut clock,
        "kfop new, including the build that writes deploy/crd.yaml",
    );
    let dir = home.join("foo-operator");
    assert!(
        std::fs::read_to_string(dir.join("deploy/crd.yaml"))
            .unwrap()
            .contains("name: foojobs.foo.example.com")
    );
    let cargo_toml = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(
        !cargo_toml.contains("[patch") && !cargo_toml.contains("path ="),
        "{cargo_toml}"
    );
    // The installed kfop knows no checkout: nothing it wrote points into one.
    let checkout = std::fs::canonicalize(workspace()).unwrap();
    for file in files(&dir) {
        let contents = text(&std::fs::read(dir.join(&file)).unwrap());
        assert!(
            !contents.contains(&*checkout.to_string_lossy()),
            "{} names the checkout",
            file.display()
        );
    }

    // A fresh scaffold is current.
    let stdout = ok("kfop gen", &mut kfop(&bin, &dir, &["gen"]));
    assert_eq!(stdout, "", "nothing to regenerate");
    ok("kfop gen --check", &mut kfop(&bin, &dir, &["gen", "--check"]));
    timed(&mut clock, "kfop gen, kfop gen --check");

    // Somewhere else entirely: nothing in the crate points back at where it was made.
    let moved = home.join("elsewhere/renamed");
    std::fs::create_dir_all(moved.parent().unwrap()).unwrap();
    std::fs::rename(&dir, &moved).unwrap();
    let dir = moved;

    let cluster = Cluster {
        bin: &bin,
        dir: work.path().join("cluster"),
    };
    let stdout = ok(
        "kfop cluster up",
        &mut kfop(
            &bin,
            &home,
            &[
                "cluster",
                "up",
                "--detach",
                "--dir",
                cluster.dir.to_str().unwrap(),
            ],
        ),
    );
    let kubeconfig = stdout
        .lines()
        .find_map(|l| l.strip_prefix("export KUBECONFIG="))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no kubeconfig in {stdout}"));
    ok(
        "kfop cluster status",
        &mut kfop(
            &bin,
            &home,
            &["cluster", "status", "--dir", cluster.dir.to_str().unwrap()],
        ),
    );
    timed(&mut clock, "kfop cluster up");

    // The scaffold's own tests, on that plane.
    let scaffold_test = |what: &str| {
        let out = kfop_testenv::cargo::command()
            .arg("test")
            .current_dir(&dir)
            .env("CARGO_TARGET_DIR", target())
            .env(kfop_testenv::ATTACH_ENV, &kubeconfig)
            .output()
            .unwrap();
        let stdout = succeeded(what, &out);
        assert!(
            stdout.contains("test a_job_gets_its_pods_and_succeeds ... ok"),
            "{stdout}"
        );
        stdout
    };
    let stdout = scaffold_test("the scaffold's cargo test");
    assert!(
        stdout.contains("test committed_crd_is_current ... ok"),
        "{stdout}"
    );
    timed(&mut clock, "the scaffold's cargo test");

    // A manifest-only framework, applied to the all-in-one operator running on the plane.
    ok(
        "kfop new --no-code",
        &mut kfop(&bin, &home, &["new", "--framework", "bar", "--no-code"]),
    );
    let client = client(&kubeconfig).await;
    kfop_testenv::install_crds(&client, [Framework::crd()])
        .await
        .unwrap();
    let operator = Operator::start(client, "default", |m| {
        kfop_operator::load_frameworks(
            kfop_operator::register(m, &BTreeSet::new(), &Default::default()).unwrap(),
            true,
        )
    });
    let out = kfop(&bin, &home, &["apply", "-f", "bar/kfop.yaml", "--wait", "60"])
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .unwrap();
    let stdout = succeeded("kfop apply", &out);
    assert!(stdout.contains("framework.kfop.dev/bar ready: "), "{stdout}");
    operator.stop().await;
    timed(&mut clock, "kfop new --no-code, kfop apply");

    // The manifest grows owned objects and hooks later: `kfop gen` alone keeps the crate whole.
    let manifest = dir.join("kfop.yaml");
    let yaml = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        yaml.replace("spec:\n", "spec:\n  resources: [configmaps]\n  hooks: true\n"),
    )
    .unwrap();
    ok(
        "kfop gen after adding resources and hooks",
        &mut kfop(&bin, &dir, &["gen"]),
    );
    assert!(
        std::fs::read_to_string(dir.join("src/hooks.rs"))
            .unwrap()
            .contains("impl Framework for Foo")
    );
    assert!(
        std::fs::read_to_string(dir.join("deploy/rbac.yaml"))
            .unwrap()
            .contains("configmaps")
    );
    scaffold_test("the scaffold's cargo test after adding resources and hooks");
    timed(
        &mut clock,
        "kfop gen and cargo test after adding resources and hooks",
    );
    drop(cluster);
}
