//! The all-in-one operator as a separate process: spawn, wait for `/readyz`, scrape `/metrics`,
//! stop with SIGTERM.
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

use crate::error::{Error, Result};

/// The operator binary: the flag, else `kfop-operator` in the release then debug target directory
/// of this workspace (next to the running `kfop-bench`).
pub fn locate(flag: Option<&Path>) -> Result<PathBuf> {
    if let Some(path) = flag {
        return Ok(path.to_owned());
    }
    let exe = std::env::current_exe().map_err(|e| Error::io("current executable", e))?;
    // target/<profile>/kfop-bench or target/<profile>/deps/<test binary>
    let target = exe
        .ancestors()
        .find(|dir| dir.file_name().is_some_and(|n| n == "target"))
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("target"));
    ["release", "debug"]
        .iter()
        .map(|profile| target.join(profile).join("kfop-operator"))
        .find(|path| path.is_file())
        .ok_or_else(|| {
            Error::Operator(format!(
                "no kfop-operator under {}; run `cargo build --release -p kfop-operator` or pass --operator-bin",
                target.display()
            ))
        })
}

/// A running operator process.
#[derive(Debug)]
pub struct Operator {
    child: Child,
    pid: u32,
    pub metrics_addr: SocketAddr,
}

impl Operator {
    /// Starts `bin` against `kubeconfig` with `args`, logging to `log`; serves metrics on a free
    /// loopback port.
    pub async fn spawn(bin: &Path, kubeconfig: &Path, args: &[String], log: &Path) -> Result<Self> {
        Self::spawn_as(bin, kubeconfig, args, log, None, &[]).await
    }

    /// [`Operator::spawn`] as the replica `identity` (its leader-election identity, `MY_POD_NAME`),
    /// with `env` set too.
    pub async fn spawn_as(
        bin: &Path,
        kubeconfig: &Path,
        args: &[String],
        log: &Path,
        identity: Option<&str>,
        env: &[(&str, &str)],
    ) -> Result<Self> {
        let metrics_addr = free_addr()?;
        let webhook = free_addr()?;
        // Appended to: a restarted operator (chaos) keeps writing to the same log.
        let log_file = std::fs::File::options()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| Error::io(log, e))?;
        let err_file = log_file.try_clone().map_err(|e| Error::io(log, e))?;
        let mut command = Command::new(bin);
        if let Some(identity) = identity {
            command.env("MY_POD_NAME", identity);
        }
        command.envs(env.iter().copied());
        command
            .args(args)
            .arg(format!("--metrics-bind-address={metrics_addr}"))
            // The conversion webhook (MPIJob v1), reached on loopback as in cluster behind its
            // Service; its Secret in a namespace every plane has.
            .arg(format!("--webhook-bind-address={webhook}"))
            .arg(format!("--webhook-url=https://{webhook}"))
            .arg("--webhook-namespace=default")
            .env("KUBECONFIG", kubeconfig)
            .env(
                "RUST_LOG",
                std::env::var("KFOP_BENCH_OPERATOR_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::from(log_file))
            .stderr(Stdio::from(err_file))
            .kill_on_drop(true);
        // kill_on_drop does not run when the benchmark itself is killed: the kernel ends the
        // operator then, so no operator outlives the plane it was measuring.
        kfop_testenv::set_parent_death_signal(command.as_std_mut());
        tracing::info!(bin = %bin.display(), ?args, %metrics_addr, "starting the operator");
        let child = command
            .spawn()
            .map_err(|e| Error::Operator(format!("spawning {}: {e}", bin.display())))?;
        let pid = child
            .id()
            .ok_or_else(|| Error::Operator("exited at once".into()))?;
        Ok(Self {
            child,
            pid,
            metrics_addr,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Waits until `/readyz` answers 200 (the caches synced).
    pub async fn wait_ready(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok((200, _)) = http_get(self.metrics_addr, "/readyz").await {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(Error::Operator(format!("exited before ready: {status}")));
            }
            if Instant::now() >= deadline {
                return Err(Error::Operator(format!("not ready after {timeout:?}")));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The operator's `/metrics` text.
    pub async fn scrape(&self) -> Result<String> {
        scrape(self.metrics_addr).await
    }

    /// SIGKILL at once, as a crash or an evicted pod would end it.
    pub async fn kill(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }

    /// SIGTERM, then SIGKILL if it has not exited within `grace`.
    pub async fn stop(mut self, grace: Duration) -> Result<()> {
        let pid = i32::try_from(self.pid).map_err(|e| Error::Operator(e.to_string()))?;
        let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(Ok(_)) => Ok(()),
            _ => {
                let _ = self.child.start_kill();
                let _ = self.child.wait().await;
                Ok(())
            }
        }
    }
}

fn free_addr() -> Result<SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| Error::io("127.0.0.1:0", e))?;
    listener.local_addr().map_err(|e| Error::io("127.0.0.1:0", e))
}

/// A minimal HTTP/1.0 GET (the operator's endpoint is plain HTTP on loopback): status and body.
/// The `/metrics` text served at `addr`.
pub async fn scrape(addr: SocketAddr) -> Result<String> {
    match http_get(addr, "/metrics").await {
        Ok((200, body)) => Ok(body),
        Ok((code, body)) => Err(Error::Scrape(format!("HTTP {code}: {body}"))),
        Err(e) => Err(Error::Scrape(e.to_string())),
    }
}

async fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(addr).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await?;
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "reading the response"))??;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((code, body.to_owned()))
}

/// One series of an OpenMetrics exposition: its labels and value.
pub type Series = (BTreeMap<String, String>, f64);

/// The series of metric `name` (exact sample name, e.g. `kfop_client_requests_total`).
pub fn series(text: &str, name: &str) -> Vec<Series> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let rest = line.strip_prefix(name)?;
            let (labels, value) = if let Some(rest) = rest.strip_prefix('{') {
                let (labels, value) = rest.split_once('}')?;
                (parse_labels(labels), value)
            } else if rest.starts_with(' ') {
                (BTreeMap::new(), rest)
            } else {
                return None;
            };
            let value = value.split_whitespace().next()?.parse().ok()?;
            Some((labels, value))
        })
        .collect()
}

fn parse_labels(text: &str) -> BTreeMap<String, String> {
    // Label values here never hold `",`; split on the `",` that ends each pair.
    text.split("\",")
        .filter_map(|pair| {
            let (key, value) = pair.split_once("=\"")?;
            Some((key.trim().to_owned(), value.trim_end_matches('"').to_owned()))
        })
        .collect()
}

/// The sum over series of `name` whose labels satisfy `filter`.
pub fn sum(text: &str, name: &str, filter: impl Fn(&BTreeMap<String, String>) -> bool) -> f64 {
    series(text, name)
        .iter()
        .filter(|(labels, _)| filter(labels))
        .map(|(_, v)| v)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# HELP kfop_client_requests API requests\n\
        # TYPE kfop_client_requests counter\n\
        kfop_client_requests_total{verb=\"create\",resource=\"pods\",code=\"201\"} 4000\n\
        kfop_client_requests_total{verb=\"patch\",resource=\"pytorchjobs/status\",code=\"200\"} 2500\n\
        kfop_client_requests_total{verb=\"list\",resource=\"pods\",code=\"200\"} 1\n\
        kfop_client_rate_limiter_wait_seconds_total 12.5\n\
        controller_runtime_reconcile_total{controller=\"pytorchjob-controller\",result=\"success\"} 3000\n\
        # EOF\n";

    #[test]
    fn parses_series_and_sums() {
        let requests = series(TEXT, "kfop_client_requests_total");
        assert_eq!(requests.len(), 3);
        assert_eq!(requests[0].0["verb"], "create");
        assert_eq!(requests[1].0["resource"], "pytorchjobs/status");
        assert_eq!(sum(TEXT, "kfop_client_requests_total", |_| true), 6501.0);
        assert_eq!(
            sum(TEXT, "kfop_client_requests_total", |l| l["verb"] == "create"),
            4000.0
        );
        assert_eq!(
            sum(TEXT, "kfop_client_rate_limiter_wait_seconds_total", |_| true),
            12.5
        );
        assert_eq!(sum(TEXT, "controller_runtime_reconcile_total", |_| true), 3000.0);
        assert!(series(TEXT, "kfop_client_requests").is_empty());
    }
}
