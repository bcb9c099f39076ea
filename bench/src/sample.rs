//! The operator process's resident memory and CPU time from `/proc/<pid>/{status,stat}`.
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;

use crate::error::{Error, Result};

/// Clock ticks per second of `/proc/<pid>/stat` times (USER_HZ, 100 on every Linux ABI).
const TICKS_PER_SECOND: f64 = 100.0;

/// One reading of the process.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the phase started.
    pub t: f64,
    /// Resident set size (VmRSS), MB (10^6 bytes).
    pub rss_mb: f64,
    /// Peak resident set size so far (VmHWM), MB.
    pub peak_rss_mb: f64,
    /// User plus system CPU time so far, seconds.
    pub cpu_seconds: f64,
}

/// Reads the process `pid` now; `t` is the caller's clock.
pub fn read(pid: u32, t: f64) -> Result<Sample> {
    let status_path = format!("/proc/{pid}/status");
    let stat_path = format!("/proc/{pid}/stat");
    let status = std::fs::read_to_string(&status_path).map_err(|e| Error::io(&status_path, e))?;
    let stat = std::fs::read_to_string(&stat_path).map_err(|e| Error::io(&stat_path, e))?;
    let (rss_kib, peak_kib) = parse_status(&status).ok_or_else(|| Error::Proc(status_path.clone()))?;
    let ticks = parse_stat_cpu_ticks(&stat).ok_or_else(|| Error::Proc(stat_path.clone()))?;
    #[allow(clippy::cast_precision_loss)]
    Ok(Sample {
        t,
        rss_mb: rss_kib as f64 * 1024.0 / 1e6,
        peak_rss_mb: peak_kib as f64 * 1024.0 / 1e6,
        cpu_seconds: ticks as f64 / TICKS_PER_SECOND,
    })
}

/// `VmRSS` and `VmHWM` of a `/proc/<pid>/status` text, in KiB.
pub fn parse_status(text: &str) -> Option<(u64, u64)> {
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// `utime + stime` of a `/proc/<pid>/stat` text, in clock ticks. The command name (field 2) may
/// hold spaces and parentheses, so fields are counted after its last `)`.
pub fn parse_stat_cpu_ticks(text: &str) -> Option<u64> {
    let rest = &text[text.rfind(')')? + 1..];
    // After the name: state is field 3, so utime (14) and stime (15) are the 12th and 13th here.
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Samples a process every `every` until aborted or the process is gone.
#[derive(Debug)]
pub struct Sampler {
    samples: Arc<Mutex<Vec<Sample>>>,
    task: JoinHandle<()>,
}

impl Sampler {
    pub fn start(pid: u32, start: Instant, every: Duration) -> Self {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let sink = samples.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tick.tick().await;
                match read(pid, start.elapsed().as_secs_f64()) {
                    Ok(sample) => sink.lock().unwrap_or_else(PoisonError::into_inner).push(sample),
                    Err(error) => {
                        tracing::debug!(%error, "sampling stopped");
                        break;
                    }
                }
            }
        });
        Self { samples, task }
    }

    /// The samples so far.
    pub fn samples(&self) -> Vec<Sample> {
        self.samples
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Stops sampling and returns every sample.
    pub fn stop(self) -> Vec<Sample> {
        self.task.abort();
        self.samples()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields() {
        let text = "Name:\tkfop-operator\nVmPeak:\t  900 kB\nVmHWM:\t   40960 kB\nVmRSS:\t   20480 kB\n";
        assert_eq!(parse_status(text), Some((20480, 40960)));
        assert_eq!(parse_status("Name:\tx\n"), None);
    }

    #[test]
    fn stat_cpu_after_a_tricky_name() {
        let text = "4242 (kfop (op) x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 9 0 100 \
                    1000000 5000 18446744073709551615";
        assert_eq!(parse_stat_cpu_ticks(text), Some(325));
        assert_eq!(parse_stat_cpu_ticks("garbage"), None);
    }

    #[test]
    fn reads_this_process() {
        let sample = read(std::process::id(), 1.0).unwrap();
        assert!(sample.rss_mb > 0.0 && sample.peak_rss_mb >= sample.rss_mb);
        assert!(sample.cpu_seconds >= 0.0);
    }
}
