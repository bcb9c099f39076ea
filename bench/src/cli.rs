//! The benchmark's flags.
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use kfop_runtime::operator::parse_duration;

#[derive(Debug, Clone, Parser)]
#[command(
    name = "kfop-bench",
    version,
    about = "Scale benchmark: PyTorchJobs through the all-in-one operator on a local kwok plane, \
             against a plain client creating the same pods and services"
)]
pub struct Args {
    /// PyTorchJobs to submit (1 master + 3 workers each)
    #[arg(long, default_value_t = 1000)]
    pub jobs: usize,
    /// Submission rate in jobs per second; 0 submits all at once
    #[arg(long, default_value_t = 0.0)]
    pub rate: f64,
    /// Jobs reconciled concurrently: the operator's --controller-threads and the ceiling's
    /// concurrent jobs
    #[arg(long, default_value_t = 16)]
    pub concurrency: u16,
    /// Creates in flight while submitting jobs all at once
    #[arg(long, default_value_t = 32)]
    pub submit_parallelism: usize,
    /// How long each pod runs before kwok ends it with exit code 0, e.g. `10s`, `500ms`
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub complete_after: Duration,
    /// kwok nodes to register (1000 pods each)
    #[arg(long, default_value_t = 16)]
    pub nodes: usize,
    /// Start the plane without its per-Service work (the endpoints and EndpointSlice
    /// controllers, the scheduler's default topology spreading): it grows with Services x pods
    /// in one namespace and, at 10,000 jobs, binds before the operator does
    #[arg(long)]
    pub lean_plane: bool,
    /// Job kinds the operator runs (repeatable); passed on as --enable-scheme
    #[arg(long = "enable-scheme", default_value = "pytorchjob")]
    pub enable_scheme: Vec<String>,
    /// Also run the operator with every bundled kind enabled on the same workload and compare its
    /// memory with the first run
    #[arg(long)]
    pub compare_all_schemes: bool,
    /// Skip the ceiling phase (no plain-client comparison)
    #[arg(long)]
    pub no_ceiling: bool,
    /// Also replay from a plain client, with the ceiling's concurrency, what the operator sends
    /// for each job before its pods all exist, up to a level (repeatable, a phase each): splits
    /// the distance to the ceiling into the request mix and the operator's own
    #[arg(long, value_enum, conflicts_with = "no_ceiling")]
    pub replay: Vec<crate::ceiling::Replay>,
    /// Also run the operator again with jobs arriving at half the ceiling's rate (measured first
    /// in the same run), for the latency target; needs the ceiling phase
    #[arg(long, conflicts_with = "no_ceiling")]
    pub paced: bool,
    /// Also run a peer operator on the same workload, last: `kubeflow` is training-operator
    /// v1.8.1 at its defaults (built from its Go module into the cache, run out of cluster)
    #[arg(long, value_enum)]
    pub peer: Option<PeerOperator>,
    /// With --peer kubeflow: also run each operator at the other's settings, so that they compare
    /// at equal settings: kfop at Kubeflow's defaults (`--controller-threads 1`,
    /// `--kube-api-qps 20`, `--kube-api-burst 30`) and Kubeflow at kfop's (`--controller-threads`
    /// the run's --concurrency, no client-side limit; v1.8.1 has no client-limit flags, so this
    /// phase runs testenv/peers/training-operator-client-flags, v1.8.1 with the two flags added)
    #[arg(long, requires = "peer")]
    pub equal_settings: bool,
    /// Also run the operator with this client-side limit, `QPS/BURST` (repeatable, a phase each),
    /// e.g. `50/100`
    #[arg(long, value_parser = parse_client_limit)]
    pub client_limit: Vec<ClientLimit>,
    /// The operator's client-side request rate (--kube-api-qps); its default when absent
    #[arg(long)]
    pub qps: Option<f32>,
    /// The operator's client-side burst (--kube-api-burst); its default when absent
    #[arg(long)]
    pub burst: Option<u32>,
    /// More flags for the operator (repeatable), e.g. `--operator-arg=--no-child-events`
    #[arg(long = "operator-arg", allow_hyphen_values = true)]
    pub operator_args: Vec<String>,
    /// Where to write results.md, results.json and the plots
    #[arg(long, default_value = "bench/results")]
    pub results: PathBuf,
    /// The operator binary; default: target/release/kfop-operator, else target/debug/kfop-operator
    /// next to this binary
    #[arg(long)]
    pub operator_bin: Option<PathBuf>,
    /// Give up on a phase after this long
    #[arg(long, default_value = "15m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Soak instead of benchmarking: the default operator (every kind) under a steady mixed
    /// workload at `--rate` (1 job/s when 0) for this long, e.g. `30m`; fails unless every job
    /// reaches its expected end, no resync finds work and RSS stays within 10%
    #[arg(long, value_parser = parse_duration)]
    pub soak: Option<Duration>,
    /// Instead of benchmarking: the operator's idle RSS with 0, 1 and this many Framework
    /// resources (job kinds registered at run time), each running one job to Succeeded
    #[arg(long)]
    pub runtime_frameworks: Option<usize>,
    /// With --soak: inject faults meanwhile (operator SIGKILL every 5 s, kube-apiserver and etcd
    /// restarts, a frozen API server) and check that nothing strands, doubles or is orphaned
    #[arg(long, requires = "soak")]
    pub chaos: bool,
    /// With --soak: also submit this many PyTorchJobs (1 master + 3 workers) all at once when it
    /// starts, each of which must succeed, stay succeeded and count its replicas right
    #[arg(long, default_value_t = 0, requires = "soak")]
    pub burst_jobs: usize,
    /// The operator's --resync-period during a soak; its default, so a job a lost event
    /// strands stays stranded past its deadline instead of being healed by a resync
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub soak_resync: Duration,
    /// With --soak: take VERB away on RESOURCE (`create:events`) from the operator's
    /// ClusterRole, so the run must report the missing permission (a check of the check)
    #[arg(long, value_name = "VERB:RESOURCE", requires = "soak")]
    pub soak_without_permission: Option<String>,
    /// Instead of benchmarking once: this many pairs of operator phases, one with
    /// `--wire-encoding json` and one with `protobuf` (alternating which goes first), each pair
    /// with the plain-client ceiling in both encodings; results in `--results`
    #[arg(long, conflicts_with_all = ["soak", "runtime_frameworks", "no_ceiling"])]
    pub wire_ab: Option<usize>,
    /// Instead of benchmarking once: this many live jobs of six kinds whose first worker fails
    /// the moment it runs (twice retried, then not), under an operator batching failures like
    /// replica counts and under one answering them at once; the time from each failure to the
    /// job's answer (results in `--results`)
    #[arg(long, conflicts_with_all = ["soak", "runtime_frameworks", "no_ceiling", "wire_ab"])]
    pub failure_reaction: Option<usize>,
    /// RSS and CPU sampling interval
    #[arg(long, default_value = "250ms", value_parser = parse_duration)]
    pub sample_every: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let args = Args::parse_from(["kfop-bench"]);
        assert_eq!(args.jobs, 1000);
        assert_eq!(args.enable_scheme, vec!["pytorchjob".to_owned()]);
        assert_eq!(args.complete_after, Duration::from_secs(10));
        assert_eq!(args.soak_resync, Duration::from_secs(300), "the operator's own");
        let args = Args::parse_from([
            "kfop-bench",
            "--jobs=5",
            "--operator-arg=--no-child-events",
            "--enable-scheme",
            "tfjob",
        ]);
        assert_eq!(args.operator_args, vec!["--no-child-events".to_owned()]);
        assert_eq!(args.enable_scheme, vec!["tfjob".to_owned()]);
    }

    #[test]
    fn client_limits() {
        let args = Args::parse_from([
            "kfop-bench",
            "--peer=kubeflow",
            "--equal-settings",
            "--client-limit=50/100",
        ]);
        assert!(args.equal_settings);
        assert_eq!(
            args.client_limit,
            vec![ClientLimit {
                qps: 50.0,
                burst: 100
            }]
        );
        assert_eq!(
            ClientLimit::KUBEFLOW.flags(),
            ["--kube-api-qps=20", "--kube-api-burst=30"]
        );
        for bad in ["50", "x/1", "50/0", "0/10"] {
            assert!(parse_client_limit(bad).is_err(), "{bad}");
        }
        assert!(Args::try_parse_from(["kfop-bench", "--equal-settings"]).is_err());
    }
}

/// A client-side request limit: `--kube-api-qps` and `--kube-api-burst`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClientLimit {
    pub qps: f32,
    pub burst: u32,
}

impl ClientLimit {
    /// Kubeflow's training-operator v1.8.1: controller-runtime's defaults.
    pub const KUBEFLOW: Self = Self { qps: 20.0, burst: 30 };

    /// The operator's flags for this limit.
    pub fn flags(self) -> [String; 2] {
        [
            format!("--kube-api-qps={}", self.qps),
            format!("--kube-api-burst={}", self.burst),
        ]
    }
}

/// Parses `QPS/BURST`, e.g. `50/100`.
fn parse_client_limit(text: &str) -> Result<ClientLimit, String> {
    let (qps, burst) = text
        .split_once('/')
        .ok_or_else(|| format!("`{text}`: expected QPS/BURST, e.g. 50/100"))?;
    let qps: f32 = qps.trim().parse().map_err(|e| format!("`{text}`: QPS: {e}"))?;
    let burst: u32 = burst
        .trim()
        .parse()
        .map_err(|e| format!("`{text}`: burst: {e}"))?;
    if qps <= 0.0 || burst == 0 {
        return Err(format!("`{text}`: QPS and burst must be positive"));
    }
    Ok(ClientLimit { qps, burst })
}

/// A peer operator the benchmark can compare with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PeerOperator {
    /// Kubeflow training-operator v1.8.1.
    Kubeflow,
}
