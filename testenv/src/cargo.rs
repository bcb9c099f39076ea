//! Running cargo from a process cargo started: a test, or `cargo run -p kfop`.
use std::process::Command;

/// `$CARGO` (the cargo that started this process) or `cargo` from `PATH`, without the variables
/// cargo sets for the crate it runs or tests. A nested cargo that inherits them sees variables
/// that build scripts track change (ring's tracks `CARGO_PKG_NAME` and `CARGO_MANIFEST_DIR`), so
/// it rebuilds ring and everything above it, and the next cargo without them rebuilds it all
/// again: in the test suite, minutes per nested build.
pub fn command() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(set_for_the_running_crate) {
            command.env_remove(name);
        }
    }
    command
}

/// Set by cargo for the crate it runs, not configuration (`CARGO_HOME`, `CARGO_TARGET_DIR`,
/// `CARGO_BUILD_*` ... stay).
fn set_for_the_running_crate(name: &str) -> bool {
    matches!(
        name,
        "CARGO_MANIFEST_DIR"
            | "CARGO_MANIFEST_PATH"
            | "CARGO_MANIFEST_LINKS"
            | "CARGO_PRIMARY_PACKAGE"
            | "CARGO_TARGET_TMPDIR"
            | "OUT_DIR"
    ) || ["CARGO_PKG_", "CARGO_CRATE_", "CARGO_BIN_"]
        .iter()
        .any(|prefix| name.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use super::set_for_the_running_crate;

    #[test]
    fn the_running_crates_variables_go_and_configuration_stays() {
        for gone in [
            "CARGO_PKG_NAME",
            "CARGO_MANIFEST_DIR",
            "CARGO_CRATE_NAME",
            "OUT_DIR",
        ] {
            assert!(set_for_the_running_crate(gone), "{gone}");
        }
        for kept in [
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO_INCREMENTAL",
            "CARGO",
            "PATH",
        ] {
            assert!(!set_for_the_running_crate(kept), "{kept}");
        }
    }

    #[test]
    fn the_command_is_cargo_without_the_running_crates_variables() {
        // Run by cargo test, so CARGO_PKG_NAME is set here and must not reach the child.
        assert!(std::env::var_os("CARGO_PKG_NAME").is_some());
        let command = super::command();
        let removed: Vec<_> = command
            .get_envs()
            .filter(|(_, value)| value.is_none())
            .map(|(name, _)| name.to_owned())
            .collect();
        assert!(removed.iter().any(|n| n == "CARGO_PKG_NAME"), "{removed:?}");
        assert!(!removed.iter().any(|n| n == "PATH"), "{removed:?}");
    }
}
