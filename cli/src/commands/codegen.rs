//! `kfop new` and `kfop gen`: the IO around [`crate::generate`].
use std::path::{Path, PathBuf};

use clap::Args;

use crate::generate::{self, File, GenerateError, KfopSource, LOCK_FILE, Lock, Owner};
use crate::manifest::{self, FILE_NAME, ManifestError};

#[derive(Debug, thiserror::Error)]
pub enum CodegenError {
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// Valid, but the engine cannot load it (the operator would refuse it the same way).
    #[error("{file}: {source}")]
    Load {
        file: PathBuf,
        source: kfop_runtime::LoadError,
    },
    #[error(transparent)]
    Generate(#[from] GenerateError),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{0} exists and is not empty; choose another --dir or pass --force to write into it")]
    DirNotEmpty(PathBuf),
    #[error("{0} exists; choose another --dir or pass --force to overwrite it")]
    ManifestExists(PathBuf),
    #[error("--framework {flag} does not match metadata.name `{manifest}` in {path}; make them equal")]
    NameMismatch {
        flag: String,
        manifest: String,
        path: PathBuf,
    },
    #[error("`{0}` is not a framework name; use lower-case letters, digits and dashes, e.g. `foo`")]
    BadName(String),
    #[error(
        "refusing to overwrite hand-edited generated files: {}; move your changes to kfop.yaml, \
         src/hooks.rs or src/spec.rs, or pass --force to discard them",
        .0.join(", ")
    )]
    Edited(Vec<String>),
    #[error("stale generated files (run `kfop gen`): {}", .0.join(", "))]
    Stale(Vec<String>),
    #[error("`cargo run -- crd` failed in {dir}: {message}")]
    Crd { dir: PathBuf, message: String },
    /// The scaffold asks the registry for a kfop crate that is not published there (yet): one
    /// line saying what to do instead of cargo's resolver output.
    #[error("{package} {version} is not on the crate registry: {fix}")]
    NotOnRegistry {
        package: String,
        version: &'static str,
        fix: &'static str,
    },
    #[error(transparent)]
    Cluster(#[from] kfop_testenv::Error),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CodegenError + '_ {
    move |source| CodegenError::Io {
        path: path.to_owned(),
        source,
    }
}

#[derive(Debug, Args)]
pub struct NewArgs {
    /// Framework name (lower case, e.g. `foo`): the crate is `<name>-operator`, the kind `<Name>Job`
    #[arg(long)]
    framework: String,
    /// Start from this manifest instead of the two-role default
    #[arg(long)]
    manifest: Option<PathBuf>,
    /// Where to create the crate (default: ./<framework>-operator, or ./<framework> with
    /// --no-code)
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Write into an existing non-empty directory (with --no-code: overwrite its kfop.yaml)
    #[arg(long)]
    force: bool,
    /// Write only <dir>/kfop.yaml, no crate: a run-time framework that the all-in-one operator
    /// loads once it is applied with `kfop apply`. It cannot have Rust hooks
    // The options below only shape the crate, so they are refused rather than ignored.
    #[arg(long, conflicts_with_all = ["kfop_source", "no_crd"])]
    no_code: bool,
    /// The API group of the new job kind (default: `<framework>.example.com`)
    #[arg(long)]
    group: Option<String>,
    /// Where the kfop crates come from: `auto` (the kfop checkout this kfop was built from, if it
    /// is still there, else the registry), `registry` (the released versions), `path=DIR` (a kfop
    /// checkout) or `git=URL`; a checkout or git URL is written as a `[patch.crates-io]` section.
    /// A crate created inside a kfop checkout uses path dependencies into it
    #[arg(long, default_value = "auto", value_parser = parse_source)]
    kfop_source: SourceArg,
    #[command(flatten)]
    common: CommonArgs,
}

/// `--kfop-source` as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceArg {
    /// The checkout this binary was built from while it exists, else the registry.
    Auto,
    Registry,
    Path(PathBuf),
    Git(String),
}

fn parse_source(text: &str) -> Result<SourceArg, String> {
    match text.split_once('=') {
        None if text == "auto" => Ok(SourceArg::Auto),
        None if text == "registry" => Ok(SourceArg::Registry),
        Some(("path", dir)) if !dir.is_empty() => Ok(SourceArg::Path(PathBuf::from(dir))),
        Some(("git", url)) if !url.is_empty() => Ok(SourceArg::Git(url.to_owned())),
        _ => Err(format!(
            "`{text}`: use `auto`, `registry`, `path=DIR` (a kfop checkout) or `git=URL`"
        )),
    }
}

#[derive(Debug, Args)]
pub struct GenArgs {
    /// The operator crate (holding kfop.yaml)
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// Change nothing; fail listing the generated files that are stale
    #[arg(long)]
    check: bool,
    /// Overwrite generated files even if they were edited by hand
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Debug, Args)]
pub struct CommonArgs {
    /// Do not build the crate to write deploy/crd.yaml (its `tests/crd.rs` then reports it stale)
    #[arg(long)]
    no_crd: bool,
}

/// The kfop checkout this binary was built from, if it is still there (an installed `kfop`
/// works without one).
fn source_root() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent()?;
    root.join("runtime/Cargo.toml").is_file().then(|| root.to_owned())
}

/// Where the crate in `dir` gets the kfop crates: a crate inside a kfop checkout is a member of
/// its workspace (relative path dependencies); otherwise as `--kfop-source` says, `auto` being
/// the checkout this binary was built from or, installed without one, the registry.
fn source(dir: &Path, arg: &SourceArg) -> KfopSource {
    let checkout = match arg {
        SourceArg::Path(root) => Some(root.clone()),
        _ => source_root(),
    };
    let arg = match (arg, &checkout) {
        (SourceArg::Auto, Some(root)) => SourceArg::Path(root.clone()),
        (SourceArg::Auto, None) => SourceArg::Registry,
        _ => arg.clone(),
    };
    if let Some(root) = &checkout
        && let Some(up) = relative(dir, root)
            .filter(|up| up.components().next().is_some() && up.components().all(|c| c.as_os_str() == ".."))
    {
        return KfopSource::Member(up.display().to_string());
    }
    match arg {
        SourceArg::Auto | SourceArg::Registry => KfopSource::Registry,
        SourceArg::Path(root) => {
            KfopSource::Path(std::fs::canonicalize(&root).unwrap_or(root).display().to_string())
        }
        SourceArg::Git(url) => KfopSource::Git(url),
    }
}

fn relative(from: &Path, to: &Path) -> Option<PathBuf> {
    let from = std::fs::canonicalize(from).ok()?;
    let to = std::fs::canonicalize(to).ok()?;
    let common = from
        .components()
        .zip(to.components())
        .take_while(|(a, b)| a == b)
        .count();
    if common <= 1 {
        return None;
    }
    let mut out = PathBuf::new();
    for _ in from.components().skip(common) {
        out.push("..");
    }
    for part in to.components().skip(common) {
        out.push(part);
    }
    Some(out)
}

fn write(dir: &Path, file: &File) -> Result<(), CodegenError> {
    let path = dir.join(&file.path);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    std::fs::write(&path, &file.contents).map_err(io(&path))
}

/// What `new` created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    /// An operator crate in this directory.
    Crate(PathBuf),
    /// Only this manifest (`--no-code`).
    Manifest(PathBuf),
}

fn check_name(name: &str) -> Result<(), CodegenError> {
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        || !name.starts_with(|c: char| c.is_ascii_lowercase())
    {
        return Err(CodegenError::BadName(name.to_owned()));
    }
    Ok(())
}

/// Refuses to clobber: a crate needs an empty directory, a bare manifest only a free file name
/// (it may sit next to anything).
fn check_target(args: &NewArgs, dir: &Path) -> Result<(), CodegenError> {
    if args.force {
        return Ok(());
    }
    if args.no_code {
        let path = dir.join(FILE_NAME);
        return if path.exists() {
            Err(CodegenError::ManifestExists(path))
        } else {
            Ok(())
        };
    }
    let non_empty = std::fs::read_dir(dir)
        .map(|mut d| d.next().is_some())
        .unwrap_or(false);
    if non_empty {
        return Err(CodegenError::DirNotEmpty(dir.to_owned()));
    }
    Ok(())
}

/// Parses and validates manifest `text`, and loads it as the operator will: what `kfop gen`
/// accepts, the compiled operator loads.
fn parse_and_load(text: &str, file: &Path) -> Result<manifest::Model, CodegenError> {
    let manifest::Validated { model, warnings } = manifest::parse_with_warnings(text, file)?;
    for warning in &warnings {
        tracing::warn!("{warning}");
    }
    kfop_runtime::Manifest::from_model(&model).map_err(|source| CodegenError::Load {
        file: file.to_owned(),
        source,
    })?;
    Ok(model)
}

pub fn new(args: &NewArgs) -> Result<Created, CodegenError> {
    let name = &args.framework;
    check_name(name)?;
    let dir = args.dir.clone().unwrap_or_else(|| {
        PathBuf::from(if args.no_code {
            name.clone()
        } else {
            format!("{name}-operator")
        })
    });
    check_target(args, &dir)?;
    let existed = dir.exists();
    let manifest_path = dir.join(FILE_NAME);
    let text = match &args.manifest {
        Some(path) => std::fs::read_to_string(path).map_err(io(path))?,
        None => manifest::default_manifest(
            name,
            &args
                .group
                .clone()
                .unwrap_or_else(|| format!("{name}.example.com")),
        ),
    };
    let model = parse_and_load(&text, args.manifest.as_deref().unwrap_or(&manifest_path))?;
    if &model.name != name {
        return Err(CodegenError::NameMismatch {
            flag: name.clone(),
            manifest: model.name,
            path: args.manifest.clone().unwrap_or(manifest_path),
        });
    }
    if args.no_code {
        manifest::check_manifest_only(&text, args.manifest.as_deref().unwrap_or(&manifest_path))?;
    }
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    std::fs::write(&manifest_path, &text).map_err(io(&manifest_path))?;
    if args.no_code {
        return Ok(Created::Manifest(manifest_path));
    }
    let source = source(&dir, &args.kfop_source);
    let files = generate::render(&model, &text, &source)?;
    for file in &files {
        write(&dir, file)?;
    }
    let lock = dir.join(LOCK_FILE);
    std::fs::write(&lock, Lock::of(&files).to_text()).map_err(io(&lock))?;
    // Start from the dependency versions this kfop was built and tested with (the scaffold's
    // Cargo.lock is the user's from then on). A crate inside the kfop tree is a workspace member
    // and uses the workspace's lock.
    let cargo_lock = dir.join("Cargo.lock");
    if !matches!(source, KfopSource::Member(_)) && !CARGO_LOCK.is_empty() && !cargo_lock.exists() {
        std::fs::write(&cargo_lock, CARGO_LOCK).map_err(io(&cargo_lock))?;
    }
    if !args.common.no_crd
        && let Err(e) = write_crd(&dir, "pass --kfop-source path=<a kfop checkout> or git=<url>")
    {
        // The error asks for a rerun with another source: leave nothing in its way.
        if matches!(e, CodegenError::NotOnRegistry { .. }) && !existed {
            let _ = std::fs::remove_dir_all(&dir);
        }
        return Err(e);
    }
    Ok(Created::Crate(dir))
}

/// What `gen` did (or, with `--check`, found).
#[derive(Debug, Default)]
pub struct GenReport {
    pub written: Vec<String>,
    pub removed: Vec<String>,
}

pub fn gen_crate(args: &GenArgs) -> Result<GenReport, CodegenError> {
    let dir = &args.dir;
    let path = dir.join(FILE_NAME);
    let text = std::fs::read_to_string(&path).map_err(|e| ManifestError {
        file: path.clone(),
        line: 0,
        column: 0,
        field: String::new(),
        message: format!("cannot read the manifest: {e}; create one with `kfop new` or pass --manifest"),
    })?;
    let model = parse_and_load(&text, &path)?;
    // Cargo.toml is the user's (written once by `new`), so where the kfop crates come from does
    // not change what `gen` writes.
    let files = generate::render(&model, &text, &KfopSource::Registry)?;
    let lock_path = dir.join(LOCK_FILE);
    let old = std::fs::read_to_string(&lock_path)
        .ok()
        .and_then(|t| Lock::parse(&t));
    let plan = generate::plan_gen(&files, old.as_ref(), |p| {
        std::fs::read_to_string(dir.join(p)).ok()
    });
    let new_lock = Lock::of(&files);
    let lock_stale = old.as_ref() != Some(&new_lock);
    if args.check {
        let mut stale: Vec<String> = plan.write.iter().map(|f| f.path.clone()).collect();
        stale.extend(plan.edited.iter().cloned());
        stale.extend(plan.remove.iter().map(|p| format!("{p} (no longer generated)")));
        if lock_stale && stale.is_empty() {
            stale.push(LOCK_FILE.to_owned());
        }
        return if stale.is_empty() {
            Ok(GenReport::default())
        } else {
            Err(CodegenError::Stale(stale))
        };
    }
    if !plan.edited.is_empty() && !args.force {
        return Err(CodegenError::Edited(plan.edited));
    }
    let mut report = GenReport::default();
    let forced = files
        .iter()
        .filter(|f| args.force && f.owner == Owner::Kfop && plan.edited.contains(&f.path));
    for file in plan.write.iter().chain(forced) {
        write(dir, file)?;
        report.written.push(file.path.clone());
    }
    for path in &plan.remove {
        let full = dir.join(path);
        std::fs::remove_file(&full).map_err(io(&full))?;
        report.removed.push(path.clone());
    }
    if lock_stale {
        std::fs::write(&lock_path, new_lock.to_text()).map_err(io(&lock_path))?;
    }
    if !args.common.no_crd {
        write_crd(
            dir,
            "add a `[patch.crates-io]` section naming a kfop checkout or git URL to Cargo.toml",
        )?;
    }
    Ok(report)
}

/// The Cargo.lock this kfop was built with (its package's, or its checkout's; empty if it had
/// none), embedded so an installed kfop needs no checkout to start a scaffold from it.
const CARGO_LOCK: &str = include_str!(concat!(env!("OUT_DIR"), "/Cargo.lock"));

/// The kfop crate a failed build asked the registry for and did not get (cargo's resolver
/// errors for a missing package, or for one without a matching version).
fn missing_kfop_crate(stderr: &str) -> Option<&str> {
    stderr.lines().find_map(|line| {
        let (_, rest) = line
            .split_once("no matching package named `")
            .or_else(|| line.split_once("failed to select a version for the requirement `"))?;
        let name = rest.split(['`', ' ']).next()?;
        name.starts_with("kfop-").then_some(name)
    })
}

/// Builds the crate and writes `deploy/crd.yaml` from its `crd` command, if it changed. `fix`
/// says what to do when the build finds a kfop crate missing from the registry.
fn write_crd(dir: &Path, fix: &'static str) -> Result<(), CodegenError> {
    let out = kfop_testenv::cargo::command()
        .args(["run", "--quiet", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .args(["--", "crd"])
        .output()
        .map_err(|e| CodegenError::Crd {
            dir: dir.to_owned(),
            message: e.to_string(),
        })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        if let Some(package) = missing_kfop_crate(&stderr) {
            return Err(CodegenError::NotOnRegistry {
                package: package.to_owned(),
                version: generate::VERSION,
                fix,
            });
        }
        let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
        let message = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
        return Err(CodegenError::Crd {
            dir: dir.to_owned(),
            message,
        });
    }
    let path = dir.join("deploy/crd.yaml");
    let yaml = String::from_utf8_lossy(&out.stdout);
    if std::fs::read_to_string(&path).ok().as_deref() != Some(&*yaml) {
        std::fs::write(&path, yaml.as_bytes()).map_err(io(&path))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use clap::{CommandFactory, FromArgMatches};

    use super::*;
    use crate::cli::Cli;

    fn parse_new(argv: &[&str]) -> Result<NewArgs, clap::Error> {
        let matches = Cli::command().try_get_matches_from(["kfop", "new"].iter().chain(argv))?;
        let (_, sub) = matches.subcommand().expect("a subcommand");
        NewArgs::from_arg_matches(sub)
    }

    fn no_code(dir: &Path, extra: &[&str]) -> NewArgs {
        let dir = dir.to_str().unwrap();
        let mut argv = vec!["--framework", "foo", "--no-code", "--dir", dir];
        argv.extend_from_slice(extra);
        parse_new(&argv).unwrap()
    }

    #[test]
    fn no_code_writes_only_the_default_manifest() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("foo");
        let created = new(&no_code(&dir, &["--group", "foo.example.org"])).unwrap();
        assert_eq!(created, Created::Manifest(dir.join(FILE_NAME)));
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [FILE_NAME]);
        assert_eq!(
            std::fs::read_to_string(dir.join(FILE_NAME)).unwrap(),
            manifest::default_manifest("foo", "foo.example.org")
        );
        // A second run would overwrite the (maybe edited) manifest: only with --force.
        let err = new(&no_code(&dir, &[])).unwrap_err();
        assert!(matches!(err, CodegenError::ManifestExists(_)), "{err}");
        new(&no_code(&dir, &["--force"])).unwrap();
    }

    #[test]
    fn no_code_sits_next_to_other_files_and_copies_a_given_manifest() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("notes.txt"), "mine").unwrap();
        let given = tmp.path().join("given.yaml");
        let text = manifest::default_manifest("foo", "foo.example.com").replace("version: v1", "version: v2");
        std::fs::write(&given, &text).unwrap();
        new(&no_code(tmp.path(), &["--manifest", given.to_str().unwrap()])).unwrap();
        assert_eq!(std::fs::read_to_string(tmp.path().join(FILE_NAME)).unwrap(), text);
    }

    #[test]
    fn no_code_refuses_hooks_naming_the_field() {
        let tmp = tempfile::tempdir().unwrap();
        let given = tmp.path().join("hooks.yaml");
        let text = manifest::default_manifest("foo", "foo.example.com") + "  hooks: true\n";
        std::fs::write(&given, &text).unwrap();
        let dir = tmp.path().join("out");
        let err = new(&no_code(&dir, &["--manifest", given.to_str().unwrap()])).unwrap_err();
        let CodegenError::Manifest(e) = &err else {
            panic!("{err:?}");
        };
        assert_eq!(
            (e.field.as_str(), e.file.as_path()),
            ("spec.hooks", given.as_path())
        );
        assert_eq!(e.line, text.lines().count());
        assert!(err.to_string().contains("remove `hooks: true`"), "{err}");
        assert!(!dir.exists(), "nothing is written");
    }

    #[test]
    fn no_code_refuses_the_crate_only_options() {
        for extra in [["--kfop-source", "registry"].as_slice(), &["--no-crd"]] {
            let mut argv = vec!["--framework", "foo", "--no-code"];
            argv.extend_from_slice(extra);
            let err = parse_new(&argv).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::ArgumentConflict, "{extra:?}");
            assert!(err.to_string().contains(extra[0]), "{err}");
        }
    }

    #[test]
    fn the_default_source_is_auto() {
        let args = parse_new(&["--framework", "foo"]).unwrap();
        assert_eq!(args.kfop_source, SourceArg::Auto);
        assert_eq!(parse_source("registry"), Ok(SourceArg::Registry));
        assert!(
            parse_source("crates")
                .unwrap_err()
                .contains("use `auto`, `registry`")
        );
    }

    #[test]
    fn auto_is_the_checkout_this_kfop_was_built_from_while_it_exists() {
        // Unit tests run from the checkout, so it exists.
        let root = std::fs::canonicalize(source_root().unwrap()).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(
            source(tmp.path(), &SourceArg::Auto),
            KfopSource::Path(root.display().to_string())
        );
        assert_eq!(source(tmp.path(), &SourceArg::Registry), KfopSource::Registry);
        let member = root.join("examples/jax");
        assert_eq!(
            source(&member, &SourceArg::Auto),
            KfopSource::Member("../..".into()),
            "a crate inside the checkout is a member"
        );
    }

    #[test]
    fn a_kfop_crate_missing_from_the_registry_is_recognised() {
        let missing = "    Updating crates.io index\n\
                       error: no matching package named `kfop-runtime` found\n\
                       location searched: crates.io index\n\
                       required by package `foo-operator v0.1.0 (/tmp/foo-operator)`\n";
        assert_eq!(missing_kfop_crate(missing), Some("kfop-runtime"));
        let other_version = "error: failed to select a version for the requirement \
                             `kfop-testenv = \"^0.1\"`\ncandidate versions found which didn't match: 0.0.1\n";
        assert_eq!(missing_kfop_crate(other_version), Some("kfop-testenv"));
        // Anything else is cargo's own error, shown as it is.
        assert_eq!(
            missing_kfop_crate("error: no matching package named `tokio` found\n"),
            None
        );
        assert_eq!(missing_kfop_crate("error[E0425]: cannot find value `x`\n"), None);
        let err = CodegenError::NotOnRegistry {
            package: "kfop-runtime".into(),
            version: "0.1.0",
            fix: "pass --kfop-source path=<a kfop checkout> or git=<url>",
        };
        assert_eq!(
            err.to_string(),
            "kfop-runtime 0.1.0 is not on the crate registry: pass --kfop-source \
             path=<a kfop checkout> or git=<url>"
        );
    }

    #[test]
    fn the_embedded_lock_is_the_checkouts() {
        let root = source_root().unwrap();
        assert_eq!(
            Some(CARGO_LOCK),
            std::fs::read_to_string(root.join("Cargo.lock")).ok().as_deref()
        );
    }
}
