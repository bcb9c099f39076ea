//! Spawning and stopping control-plane components.
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::{Error, Result};

/// One running component, its stdout and stderr going to `log`.
#[derive(Debug)]
pub(crate) struct Component {
    pub name: String,
    pub child: Child,
    pub log: PathBuf,
    /// How it was started, to start it again the same way.
    bin: PathBuf,
    args: Vec<String>,
    lifetime: Lifetime,
}

/// Whether a component should die with the process that started it (tests) or outlive it
/// (`kfop cluster up --detach`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifetime {
    DieWithParent,
    Detached,
}

pub(crate) fn spawn(
    name: &str,
    bin: &Path,
    args: &[String],
    logs: &Path,
    lifetime: Lifetime,
) -> Result<Component> {
    let log = logs.join(format!("{name}.log"));
    // Appended to, so a restarted component's log keeps what it said before.
    let out = File::options()
        .create(true)
        .append(true)
        .open(&log)
        .map_err(Error::io(&log))?;
    let err = out.try_clone().map_err(Error::io(&log))?;
    let mut cmd = Command::new(bin);
    cmd.args(args).stdin(Stdio::null()).stdout(out).stderr(err);
    if lifetime == Lifetime::DieWithParent {
        set_parent_death_signal(&mut cmd);
    }
    let child = cmd.spawn().map_err(|source| Error::Spawn {
        component: name.to_owned(),
        source,
    })?;
    tracing::debug!(component = name, pid = child.id(), "started");
    Ok(Component {
        name: name.to_owned(),
        child,
        log,
        bin: bin.to_owned(),
        args: args.to_owned(),
        lifetime,
    })
}

/// The kernel SIGKILLs the child when the thread that spawned it exits, so a test process that
/// crashes or is killed never leaves etcd or kube-apiserver behind. Callers spawn from a thread
/// that lives as long as the process.
#[allow(unsafe_code)]
pub fn set_parent_death_signal(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs between fork and exec and only calls prctl(2), which is
    // async-signal-safe and allocates nothing.
    unsafe {
        cmd.pre_exec(|| nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from));
    }
}

impl Component {
    /// Stops the process (SIGTERM, SIGKILL after `grace`) and starts it again with the same
    /// binary, arguments and log.
    pub fn restart(&mut self, grace: Duration) -> Result<()> {
        stop_pid(self.child.id(), grace);
        let _ = self.child.wait();
        let logs = self.log.parent().map(Path::to_owned).unwrap_or_default();
        *self = spawn(&self.name, &self.bin, &self.args, &logs, self.lifetime)?;
        Ok(())
    }

    /// Freezes (SIGSTOP) or thaws (SIGCONT) the process: a component that stops answering
    /// without closing its connections.
    pub fn freeze(&self, frozen: bool) -> Result<()> {
        let pid = i32::try_from(self.child.id()).map_err(|e| Error::Startup(e.to_string()))?;
        let signal = if frozen { Signal::SIGSTOP } else { Signal::SIGCONT };
        kill(Pid::from_raw(pid), signal)
            .map_err(|e| Error::Startup(format!("{signal} to {}: {e}", self.name)))
    }

    /// Fails with the log tail if the component has already exited.
    pub fn check_alive(&mut self) -> Result<()> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(Error::ComponentExited {
                component: self.name.clone(),
                status: status.to_string(),
                log: self.log.clone(),
                tail: log_tail(&self.log, 30),
            }),
            Err(e) => Err(Error::io(&self.log)(e)),
        }
    }
}

/// SIGTERM, then SIGKILL after `grace`. Stopping an already gone process is not an error.
pub(crate) fn stop_pid(pid: u32, grace: Duration) {
    let Ok(raw) = i32::try_from(pid) else { return };
    let pid = Pid::from_raw(raw);
    if kill(pid, Signal::SIGTERM).is_err() {
        return;
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if !pid_alive(raw) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = kill(pid, Signal::SIGKILL);
}

pub(crate) fn pid_alive(pid: i32) -> bool {
    // Signal 0 checks existence; a zombie still "exists", so also look at /proc state.
    if kill(Pid::from_raw(pid), None).is_err() {
        return false;
    }
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            !s.rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
