//! Where the control-plane binaries are: the version-keyed cache that `build.sh` fills.
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// The command that builds the binaries, relative to the kfop repository root.
pub const BUILD_COMMAND: &str = "testenv/controlplane/build.sh";

const K8S_GO_MOD: &str = include_str!("../controlplane/k8s/go.mod");
const ETCD_GO_MOD: &str = include_str!("../controlplane/etcd/go.mod");
const KWOK_GO_MOD: &str = include_str!("../controlplane/kwok/go.mod");

/// The build recipe (script and Go wrapper modules), embedded so that a crate using kfop-testenv
/// from a registry, or an installed `kfop`, can build the plane with no kfop checkout present.
const RECIPE: [(&str, &str); 11] = [
    ("build.sh", include_str!("../controlplane/build.sh")),
    ("k8s/go.mod", K8S_GO_MOD),
    ("k8s/go.sum", include_str!("../controlplane/k8s/go.sum")),
    ("etcd/go.mod", ETCD_GO_MOD),
    ("etcd/go.sum", include_str!("../controlplane/etcd/go.sum")),
    ("kwok/go.mod", KWOK_GO_MOD),
    ("kwok/go.sum", include_str!("../controlplane/kwok/go.sum")),
    (
        "pod-reaper/main.go",
        include_str!("../controlplane/pod-reaper/main.go"),
    ),
    (
        "pod-reaper/sync.go",
        include_str!("../controlplane/pod-reaper/sync.go"),
    ),
    (
        "pod-reaper/go.mod",
        include_str!("../controlplane/pod-reaper/go.mod"),
    ),
    (
        "pod-reaper/go.sum",
        include_str!("../controlplane/pod-reaper/go.sum"),
    ),
];

/// The kwok configuration (node and pod Stages) shipped with the plane.
pub(crate) const KWOK_CONFIG: &str = include_str!("../controlplane/kwok.yaml");

/// The binaries of the local control plane: Kubernetes' own, kwok, and kfop's pod-reaper.
#[derive(Debug, Clone)]
pub struct Assets {
    pub dir: PathBuf,
}

impl Assets {
    pub const COMPONENTS: [&'static str; 6] = [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kwok",
        "pod-reaper",
    ];

    /// `KFOP_CONTROL_PLANE_BIN` if set, else the cache directory `build.sh` writes to.
    pub fn locate() -> Result<Self> {
        let dir = match std::env::var_os("KFOP_CONTROL_PLANE_BIN") {
            Some(dir) => PathBuf::from(dir),
            None => default_bin_dir(),
        };
        let assets = Self { dir };
        for name in Self::COMPONENTS {
            if !assets.path(name).is_file() {
                return Err(Error::MissingBinary {
                    name: name.to_owned(),
                    dir: assets.dir.clone(),
                    command: BUILD_COMMAND,
                });
            }
        }
        Ok(assets)
    }

    /// Like [`Assets::locate`], but builds the binaries first when they are missing, from the
    /// embedded recipe written out to the cache (a cold build takes minutes and needs Go; its
    /// progress goes to stderr).
    pub fn locate_or_build() -> Result<Self> {
        match Self::locate() {
            Err(Error::MissingBinary { .. }) => {
                let script = write_recipe(&default_bin_dir())?;
                let status = crate::build_progress::run(&script)?;
                if !status.success() {
                    return Err(Error::Startup(format!("{} failed ({status})", script.display())));
                }
                Self::locate()
            }
            other => other,
        }
    }

    pub fn path(&self, component: &str) -> PathBuf {
        self.dir.join(component)
    }
}

/// The Kubernetes version the plane is built from (`v1.37.2`): the one place it is set is the
/// `k8s.io/kubernetes` line of `controlplane/k8s/go.mod`.
pub(crate) fn kubernetes_version() -> String {
    required_version(K8S_GO_MOD, "k8s.io/kubernetes")
}

/// Mirrors the cache key in `build.sh`: both read the versions from the wrapper go.mod files.
fn default_bin_dir() -> PathBuf {
    let key = format!(
        "k8s-{}_etcd-{}_kwok-{}",
        kubernetes_version(),
        required_version(ETCD_GO_MOD, "go.etcd.io/etcd/server/v3"),
        required_version(KWOK_GO_MOD, "sigs.k8s.io/kwok"),
    );
    cache_root().join("controlplane").join(key).join("bin")
}

/// Writes the embedded recipe next to `bin` (`<cache>/controlplane/<versions>/recipe`) and
/// returns its build script.
fn write_recipe(bin: &Path) -> Result<PathBuf> {
    let dir = bin
        .parent()
        .map_or_else(|| bin.join("recipe"), |p| p.join("recipe"));
    for (file, contents) in RECIPE {
        let path = dir.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(Error::io(parent))?;
        }
        std::fs::write(&path, contents).map_err(Error::io(&path))?;
    }
    Ok(dir.join("build.sh"))
}

fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("KFOP_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("kfop")
}

/// The version a go.mod `require` line gives a module (the same lookup as build.sh's awk).
fn required_version(go_mod: &str, module: &str) -> String {
    go_mod
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            (words.next()? == module).then(|| words.next().map(str::to_owned))?
        })
        .next()
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_come_from_the_wrapper_modules() {
        assert!(kubernetes_version().starts_with("v1.3"));
        assert!(required_version(ETCD_GO_MOD, "go.etcd.io/etcd/server/v3").starts_with("v3.6"));
        assert!(required_version(KWOK_GO_MOD, "sigs.k8s.io/kwok").starts_with("v0."));
        assert_eq!(required_version("require x v1\n", "y"), "unknown");
    }

    #[test]
    fn the_embedded_recipe_writes_out_whole() {
        let dir = std::env::temp_dir().join(format!("kfop-recipe-{}", std::process::id()));
        let script = write_recipe(&dir.join("bin")).unwrap();
        assert_eq!(script, dir.join("recipe/build.sh"));
        for (file, contents) in RECIPE {
            assert_eq!(
                std::fs::read_to_string(dir.join("recipe").join(file)).unwrap(),
                contents
            );
        }
        // The script reads the versions from the modules beside it, as in the source tree.
        assert!(
            std::fs::read_to_string(&script)
                .unwrap()
                .contains("$here/k8s/go.mod")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn kwok_config_carries_the_exit_stage() {
        assert!(KWOK_CONFIG.contains("kwok.kfop.dev/exit-code"));
        assert!(KWOK_CONFIG.contains("name: pod-ready"));
    }
}
