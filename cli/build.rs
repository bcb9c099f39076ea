//! Embeds the Cargo.lock kfop is built with: `kfop new` starts a scaffold from the dependency
//! versions kfop was tested with, also when installed from a package, with no checkout to copy
//! the lock from.
use std::path::{Path, PathBuf};

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    // A package carries its own lock; in a checkout the workspace's is one level up.
    let lock = [
        manifest_dir.join("Cargo.lock"),
        manifest_dir.join("../Cargo.lock"),
    ]
    .into_iter()
    .find(|p| p.is_file());
    let contents = match &lock {
        Some(path) => {
            println!("cargo::rerun-if-changed={}", path.display());
            std::fs::read_to_string(path).unwrap_or_default()
        }
        None => String::new(),
    };
    println!("cargo::rerun-if-changed=build.rs");
    write_if_changed(&out_dir.join("Cargo.lock"), &contents);
}

/// An unchanged file keeps its time stamp, so the crate is not rebuilt for nothing.
fn write_if_changed(path: &Path, contents: &str) {
    if std::fs::read_to_string(path).ok().as_deref() != Some(contents)
        && let Err(e) = std::fs::write(path, contents)
    {
        println!("cargo::error={}: {e}", path.display());
    }
}
