//! The cold control-plane build as a progress bar: `build.sh` runs for 10-25 minutes and logs
//! `[control-plane] building <component> (<step>/<steps>) ...` before each Go build; the bar
//! shows the step, the component and the time so far. Every log line is kept (printed above the
//! bar); without a terminal (CI) indicatif draws nothing and the lines alone show progress.
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::{Error, Result};

/// Runs `script` with bash, its stdout discarded, its stderr log turned into progress.
pub(crate) fn run(script: &Path) -> Result<ExitStatus> {
    let spawn_error = |source| Error::Spawn {
        component: script.display().to_string(),
        source,
    };
    let mut child = Command::new("bash")
        .arg(script)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn_error)?;
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{spinner} control plane {pos}/{len} {msg} [{elapsed}]")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines().map_while(std::io::Result::ok) {
            if let Some((component, step, steps)) = parse_step(&line) {
                bar.set_length(steps);
                bar.set_position(step.saturating_sub(1));
                bar.set_message(format!("building {component}"));
            }
            if bar.is_hidden() {
                eprintln!("{line}");
            } else {
                bar.println(&line);
            }
        }
    }
    let status = child.wait().map_err(spawn_error)?;
    bar.finish_and_clear();
    Ok(status)
}

/// `(component, step, steps)` from a `building <component> (<step>/<steps>) ...` line.
fn parse_step(line: &str) -> Option<(&str, u64, u64)> {
    let rest = line.split_once("building ")?.1;
    let (component, rest) = rest.split_once(" (")?;
    let (counts, _) = rest.split_once(')')?;
    let (step, steps) = counts.split_once('/')?;
    Some((component, step.parse().ok()?, steps.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_build_steps() {
        assert_eq!(
            parse_step("[control-plane] building kube-apiserver (2/6) ..."),
            Some(("kube-apiserver", 2, 6))
        );
        assert_eq!(parse_step("[control-plane] built etcd in 40s"), None);
        assert_eq!(
            parse_step("[control-plane] cold build of etcd kwok into /x"),
            None
        );
    }

    /// The script's exit status comes back through the log reading, failure included.
    #[test]
    fn runs_the_script_to_its_end() {
        let dir = std::env::temp_dir().join(format!("kfop-build-progress-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("build.sh");
        let body = "echo '[control-plane] building etcd (1/2) ...' >&2\n\
                    echo '[control-plane] building kwok (2/2) ...' >&2\necho /bin\nexit ";
        std::fs::write(&script, format!("{body}0\n")).unwrap();
        assert!(run(&script).unwrap().success());
        std::fs::write(&script, format!("{body}3\n")).unwrap();
        assert_eq!(run(&script).unwrap().code(), Some(3));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
