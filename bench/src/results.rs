//! What a run measured: per phase figures computed from the timeline, the process samples and the
//! operator's metrics, serialized as results.json.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::operator;
use crate::sample::Sample;
use crate::stats::{self, Percentiles};
use crate::timeline::{JobMarks, Timeline};

/// How the run was set up.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunConfig {
    pub jobs: usize,
    pub pods_per_job: usize,
    /// Jobs per second; 0 for all at once.
    pub rate: f64,
    pub concurrency: u16,
    pub complete_after_seconds: f64,
    pub nodes: usize,
    pub schemes: Vec<String>,
    pub operator_args: Vec<String>,
    pub cores: usize,
    pub date: String,
    /// The plane ran without its per-Service work (`--lean-plane`).
    #[serde(default)]
    pub lean_plane: bool,
}

/// The operator process over a phase.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessStats {
    /// CPU seconds from ready to the end of the phase.
    pub cpu_seconds: f64,
    /// RSS once ready, before any job (MB).
    pub idle_rss_mb: f64,
    /// Peak RSS over the phase (VmHWM, MB).
    pub peak_rss_mb: f64,
    /// RSS at the end, with every job still present (MB).
    pub end_rss_mb: f64,
}

impl ProcessStats {
    /// From samples; the first is taken as the idle reading.
    pub fn of(samples: &[Sample]) -> Option<Self> {
        let first = samples.first()?;
        let last = samples.last()?;
        Some(Self {
            cpu_seconds: last.cpu_seconds - first.cpu_seconds,
            idle_rss_mb: first.rss_mb,
            peak_rss_mb: samples.iter().map(|s| s.peak_rss_mb).fold(0.0, f64::max),
            end_rss_mb: last.rss_mb,
        })
    }

    /// What each live job costs the operator: the peak's growth over idle, per job (KB).
    pub fn kb_per_job(&self, jobs: usize) -> Option<f64> {
        (jobs > 0).then(|| (self.peak_rss_mb - self.idle_rss_mb) * 1000.0 / jobs as f64)
    }
}

/// The operator's API requests during a phase, from `kfop_client_requests_total`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestStats {
    pub total: f64,
    pub per_job: f64,
    /// Requests per job by `verb resource code`.
    pub per_job_by_kind: BTreeMap<String, f64>,
    /// Seconds requests waited for the client-side rate limiter, summed over requests; `None`
    /// when the operator does not export it (Kubeflow's controller-runtime does not).
    #[serde(default)]
    pub rate_limiter_wait_seconds: Option<f64>,
    /// Reconciles per job (`controller_runtime_reconcile_total`).
    pub reconciles_per_job: f64,
    /// Mean reconcile duration, seconds (`controller_runtime_reconcile_time_seconds`).
    #[serde(default)]
    pub reconcile_mean_seconds: f64,
}

/// Where an operator's `/metrics` counts its API requests.
#[derive(Debug, Clone, Copy)]
pub struct RequestMetrics {
    /// The request counter.
    pub requests: &'static str,
    /// Its labels that name a kind of request, in the order they are shown.
    pub kind_labels: &'static [&'static str],
    /// Seconds waited for the client-side rate limiter: a counter, or a histogram's `_sum`.
    pub limiter_wait: &'static str,
}

impl RequestMetrics {
    /// kfop's `kfop_client_requests_total{verb,resource,code}`.
    pub const KFOP: Self = Self {
        requests: "kfop_client_requests_total",
        kind_labels: &["verb", "resource", "code"],
        limiter_wait: "kfop_client_rate_limiter_wait_seconds_total",
    };
    /// client-go's, as controller-runtime exports them (Kubeflow): by HTTP method and code only,
    /// so the resource of a request is not known.
    pub const CLIENT_GO: Self = Self {
        requests: "rest_client_requests_total",
        kind_labels: &["method", "code"],
        limiter_wait: "rest_client_rate_limiter_duration_seconds_sum",
    };
}

impl RequestStats {
    /// The difference between two scrapes of an operator's `/metrics` counting its requests in
    /// `metrics`, per job. Reconciles are controller-runtime's metric names, which kfop shares.
    pub fn between(metrics: RequestMetrics, before: &str, after: &str, jobs: usize) -> Self {
        #[allow(clippy::cast_precision_loss)]
        let jobs = jobs.max(1) as f64;
        let by_kind = |text: &str| -> BTreeMap<String, f64> {
            let mut kinds = BTreeMap::new();
            for (labels, value) in operator::series(text, metrics.requests) {
                let get = |k: &str| labels.get(k).map_or("", String::as_str);
                let key: Vec<&str> = metrics.kind_labels.iter().map(|k| get(k)).collect();
                *kinds.entry(key.join(" ")).or_insert(0.0) += value;
            }
            kinds
        };
        let (b, a) = (by_kind(before), by_kind(after));
        let per_job_by_kind: BTreeMap<String, f64> = a
            .iter()
            .map(|(k, v)| (k.clone(), (v - b.get(k).copied().unwrap_or(0.0)) / jobs))
            .filter(|(_, v)| *v > 0.0)
            .collect();
        let delta = |name: &str| operator::sum(after, name, |_| true) - operator::sum(before, name, |_| true);
        let total = delta(metrics.requests);
        let reconciles = delta("controller_runtime_reconcile_time_seconds_count");
        let reconcile_seconds = delta("controller_runtime_reconcile_time_seconds_sum");
        Self {
            total,
            per_job: total / jobs,
            per_job_by_kind,
            rate_limiter_wait_seconds: (!operator::series(after, metrics.limiter_wait).is_empty())
                .then(|| delta(metrics.limiter_wait)),
            reconciles_per_job: delta("controller_runtime_reconcile_total") / jobs,
            reconcile_mean_seconds: if reconciles > 0.0 {
                reconcile_seconds / reconciles
            } else {
                0.0
            },
        }
    }
}

/// One phase: the operator with some kinds enabled, or the plain-client ceiling.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Phase {
    pub name: String,
    pub jobs: usize,
    /// Jobs/s from the first submission to the last job whose pods all exist.
    pub throughput_all_pods: Option<f64>,
    /// Jobs/s from the first submission to the last job Succeeded.
    pub throughput_succeeded: Option<f64>,
    pub latency_all_pods: Option<Percentiles>,
    pub latency_running: Option<Percentiles>,
    pub latency_succeeded: Option<Percentiles>,
    pub process: Option<ProcessStats>,
    pub requests: Option<RequestStats>,
    /// kube-apiserver's CPU time (user + system, from /proc) from the phase's first request to
    /// its last job reaching its end, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_seconds: Option<f64>,
    /// Jobs that did not reach every milestone before the timeout (for the ceiling: all pods).
    pub incomplete: usize,
    pub timeline: Timeline,
    pub samples: Vec<Sample>,
}

impl Phase {
    /// Throughput and latencies from a phase's timeline; `expect_success` for operator phases.
    pub fn from_timeline(name: &str, timeline: Timeline, expect_success: bool) -> Self {
        let jobs = timeline.submitted_jobs();
        let submitted: Vec<f64> = jobs.iter().filter_map(|m| m.submitted).collect();
        let first = submitted.iter().copied().fold(f64::INFINITY, f64::min);
        let column = |f: fn(&JobMarks) -> Option<f64>| jobs.iter().map(|m| f(m)).collect::<Vec<_>>();
        let latencies = |f: fn(&JobMarks) -> Option<f64>| {
            Percentiles::of(&stats::latencies(
                jobs.iter().filter_map(|m| m.submitted.map(|s| (s, f(m)))),
            ))
        };
        let throughput = |f: fn(&JobMarks) -> Option<f64>| {
            stats::all_reached(&column(f)).and_then(|last| stats::throughput(jobs.len(), first, last))
        };
        let incomplete = jobs
            .iter()
            .filter(|m| {
                m.all_pods.is_none() || (expect_success && (m.all_running.is_none() || m.succeeded.is_none()))
            })
            .count();
        let (throughput_succeeded, latency_succeeded) = if expect_success {
            (throughput(|m| m.succeeded), latencies(|m| m.succeeded))
        } else {
            (None, None)
        };
        Self {
            name: name.to_owned(),
            jobs: jobs.len(),
            throughput_all_pods: throughput(|m| m.all_pods),
            throughput_succeeded,
            latency_all_pods: latencies(|m| m.all_pods),
            latency_running: latencies(|m| m.all_running),
            latency_succeeded,
            process: None,
            requests: None,
            server_cpu_seconds: None,
            incomplete,
            timeline,
            samples: Vec::new(),
        }
    }
}

/// Everything a run measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Run {
    pub config: RunConfig,
    /// The operator with the requested kinds.
    pub operator: Phase,
    /// The plain-client ceiling, unless skipped.
    pub ceiling: Option<Phase>,
    /// The operator's requests from a plain client, a phase per `--replay` level.
    #[serde(default)]
    pub replay: Vec<Phase>,
    /// The operator with every kind enabled, with `--compare-all-schemes`.
    pub all_schemes: Option<Phase>,
    /// Kubeflow's training-operator on the same workload, with `--peer kubeflow`.
    #[serde(default)]
    pub kubeflow: Option<Phase>,
    /// The operator again with jobs arriving at half the ceiling's rate, with `--paced`.
    #[serde(default)]
    pub paced: Option<Paced>,
    /// The operator at other settings than the first phase's: at Kubeflow's defaults (with
    /// `--equal-settings`), then at each `--client-limit`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<Phase>,
    /// Kubeflow at the operator's settings (its threads, no client-side limit), with
    /// `--equal-settings`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeflow_matched: Option<Phase>,
}

impl Run {
    /// The run's figures without its per-job timelines and samples: small enough to commit, and
    /// what docs/benchmarks.md's table is rendered from.
    pub fn summary(&self) -> Self {
        let mut run = self.clone();
        let phases = [
            Some(&mut run.operator),
            run.ceiling.as_mut(),
            run.all_schemes.as_mut(),
        ]
        .into_iter()
        .chain([
            run.kubeflow.as_mut(),
            run.paced.as_mut().map(|p| &mut p.phase),
            run.kubeflow_matched.as_mut(),
        ])
        .flatten()
        .chain(run.replay.iter_mut())
        .chain(run.settings.iter_mut());
        for phase in phases {
            phase.timeline = Timeline::default();
            phase.samples.clear();
        }
        run
    }
}

/// An operator phase whose jobs arrived at a steady rate derived from the run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Paced {
    /// Jobs per second.
    pub rate: f64,
    pub phase: Phase,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::PodProgress;

    #[test]
    fn phase_figures_from_a_timeline() {
        let mut t = Timeline::new(1);
        for (i, (sub, pod, ok)) in [(0.0, 1.0, 5.0), (1.0, 1.5, 6.0), (2.0, 4.0, 8.0)]
            .iter()
            .enumerate()
        {
            let job = format!("j{i}");
            t.submitted(&job, *sub);
            t.pod(&job, &format!("{job}-0"), PodProgress::Ran, *pod);
            t.job_seen(&job, true, false, *ok);
        }
        let phase = Phase::from_timeline("operator", t, true);
        assert_eq!(phase.jobs, 3);
        assert_eq!(phase.throughput_all_pods, Some(3.0 / 4.0));
        assert_eq!(phase.throughput_succeeded, Some(3.0 / 8.0));
        let pods = phase.latency_all_pods.unwrap();
        assert_eq!((pods.p50, pods.max), (1.0, 2.0));
        assert_eq!(phase.incomplete, 0);
    }

    #[test]
    fn unfinished_jobs_leave_no_throughput() {
        let mut t = Timeline::new(1);
        t.submitted("a", 0.0);
        t.submitted("b", 0.0);
        t.pod("a", "a-0", PodProgress::Exists, 1.0);
        let phase = Phase::from_timeline("ceiling", t, false);
        assert_eq!(phase.throughput_all_pods, None);
        assert_eq!(phase.incomplete, 1);
        assert_eq!(phase.latency_all_pods.map(|p| p.count), Some(1));
    }

    #[test]
    fn requests_between_scrapes() {
        let before = "kfop_client_requests_total{verb=\"list\",resource=\"pods\",code=\"200\"} 2\n";
        let after = "kfop_client_requests_total{verb=\"list\",resource=\"pods\",code=\"200\"} 2\n\
                     kfop_client_requests_total{verb=\"create\",resource=\"pods\",code=\"201\"} 40\n\
                     kfop_client_rate_limiter_wait_seconds_total 3.5\n\
                     controller_runtime_reconcile_total{controller=\"c\",result=\"success\"} 30\n\
                     controller_runtime_reconcile_time_seconds_sum{controller=\"c\"} 6.0\n\
                     controller_runtime_reconcile_time_seconds_count{controller=\"c\"} 30\n";
        let r = RequestStats::between(RequestMetrics::KFOP, before, after, 10);
        assert_eq!(r.total, 40.0);
        assert_eq!(r.per_job, 4.0);
        assert_eq!(r.per_job_by_kind.len(), 1);
        assert_eq!(r.per_job_by_kind["create pods 201"], 4.0);
        assert_eq!(r.rate_limiter_wait_seconds, Some(3.5));
        assert_eq!(r.reconciles_per_job, 3.0);
        assert!((r.reconcile_mean_seconds - 0.2).abs() < 1e-9);
    }

    #[test]
    fn kubeflow_requests_by_method_and_code() {
        let after = "rest_client_requests_total{code=\"201\",host=\"127.0.0.1:1\",method=\"POST\"} 80\n\
                     rest_client_requests_total{code=\"200\",host=\"127.0.0.1:1\",method=\"GET\"} 20\n\
                     rest_client_rate_limiter_duration_seconds_sum{host=\"127.0.0.1:1\",verb=\"POST\"} 7.5\n";
        let r = RequestStats::between(RequestMetrics::CLIENT_GO, "", after, 10);
        assert_eq!((r.total, r.per_job), (100.0, 10.0));
        assert_eq!(r.per_job_by_kind["POST 201"], 8.0);
        assert_eq!(r.rate_limiter_wait_seconds, Some(7.5));
    }

    #[test]
    fn process_stats_from_samples() {
        let s = |t, rss, peak, cpu| Sample {
            t,
            rss_mb: rss,
            peak_rss_mb: peak,
            cpu_seconds: cpu,
        };
        let p = ProcessStats::of(&[
            s(0.0, 10.0, 10.0, 1.0),
            s(1.0, 30.0, 30.0, 2.0),
            s(2.0, 20.0, 30.0, 4.5),
        ])
        .unwrap();
        assert_eq!(
            p,
            ProcessStats {
                cpu_seconds: 3.5,
                idle_rss_mb: 10.0,
                peak_rss_mb: 30.0,
                end_rss_mb: 20.0
            }
        );
        assert_eq!(ProcessStats::of(&[]), None);
    }
}
