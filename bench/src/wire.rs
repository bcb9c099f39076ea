//! `--wire-ab PAIRS`: the operator's two wire encodings (`--wire-encoding json|protobuf`) on one
//! plane in one run, alternating (JSON first in odd pairs, protobuf first in even ones: one phase
//! moves ±15% on a shared machine), with the plain-client ceiling sending the same pods and
//! services in each encoding once per pair. Every phase records kube-apiserver's CPU time.
use std::collections::BTreeMap;
use std::fmt::Write as _;

use kfop_runtime::wire::{self, Encoding, Wire};
use serde::{Deserialize, Serialize};

use crate::ceiling::{Children, Requests};
use crate::cli::Args;
use crate::error::{Error, Result};
use crate::operator;
use crate::results::{Phase, RunConfig};
use crate::run::{self, CEILING_NAMESPACE, CeilingPhase, OperatorPhase};

/// Everything an A/B run measured, in the order run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WireRun {
    pub config: RunConfig,
    pub command: String,
    /// Captured pods the protobuf conversion does not cover (sent as JSON by both sides).
    pub uncovered_pods: usize,
    pub phases: Vec<WirePhase>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WirePhase {
    pub encoding: String,
    pub ceiling: bool,
    /// `/proc/loadavg` when the phase started: how busy the shared machine was.
    pub load: String,
    pub phase: Phase,
}

fn name(encoding: Encoding) -> &'static str {
    match encoding {
        Encoding::Json => "json",
        Encoding::Protobuf => "protobuf",
    }
}

fn ceiling_name(encoding: Encoding) -> &'static str {
    match encoding {
        Encoding::Json => "ceiling (plain client, JSON)",
        Encoding::Protobuf => "ceiling (plain client, protobuf)",
    }
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Runs `pairs` A/B pairs and writes results.md and results.json into `--results`.
pub async fn run(args: &Args, pairs: usize) -> Result<WireRun> {
    let bin = operator::locate(args.operator_bin.as_deref())?;
    std::fs::create_dir_all(&args.results).map_err(|e| Error::io(&args.results, e))?;
    let results = std::fs::canonicalize(&args.results).map_err(|e| Error::io(&args.results, e))?;
    let (plane, client) = run::start_plane(args).await?;
    let schemes = args.enable_scheme.clone();
    let mut captured: Option<BTreeMap<String, Children>> = None;
    let mut phases = Vec::new();
    for pair in 1..=pairs {
        let order = if pair % 2 == 1 {
            [Encoding::Json, Encoding::Protobuf]
        } else {
            [Encoding::Protobuf, Encoding::Json]
        };
        for encoding in order {
            let mut with = args.clone();
            with.operator_args
                .push(format!("--wire-encoding={}", name(encoding)));
            let load = load();
            let (phase, jobs) = run::operator_phase(
                &with,
                &bin,
                &plane,
                &client,
                &OperatorPhase {
                    name: format!("operator, {} (pair {pair})", name(encoding)),
                    namespace: "bench-operator",
                    schemes: &schemes,
                    capture: captured.is_none(),
                    rate: args.rate,
                    threads: args.concurrency,
                    limit: None,
                    log: results.join(format!("operator-{}-{pair}.log", name(encoding))),
                },
            )
            .await?;
            captured = captured.or(jobs);
            phases.push(WirePhase {
                encoding: name(encoding).to_owned(),
                ceiling: false,
                load,
                phase,
            });
        }
        let Some(jobs) = &captured else { continue };
        for encoding in order {
            let load = load();
            // The plain client is this process: its creates follow the process's encoding.
            wire::set_encoding(encoding);
            let phase = run::ceiling_phase(
                args,
                &plane,
                &client,
                jobs.clone(),
                CeilingPhase {
                    name: ceiling_name(encoding),
                    namespace: CEILING_NAMESPACE,
                    requests: Requests::Children,
                },
            )
            .await;
            wire::set_encoding(Encoding::Json);
            phases.push(WirePhase {
                encoding: name(encoding).to_owned(),
                ceiling: true,
                load,
                phase: phase?,
            });
        }
    }
    let uncovered_pods = captured
        .iter()
        .flat_map(BTreeMap::values)
        .flat_map(|c| &c.pods)
        .filter(|p| p.to_pb().is_none())
        .count();
    let mut config = run::config(args);
    config.date = run::date();
    let run = WireRun {
        config,
        command: std::env::args().collect::<Vec<_>>().join(" "),
        uncovered_pods,
        phases,
    };
    for (file, text) in [
        ("results.json", serde_json::to_string_pretty(&run)?),
        ("results.md", markdown(&run)),
    ] {
        let path = results.join(file);
        std::fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
    }
    drop(plane);
    Ok(run)
}

/// The mean of `f` over the phases of one side that have it.
fn mean(phases: &[&WirePhase], f: impl Fn(&WirePhase) -> Option<f64>) -> Option<f64> {
    let values: Vec<f64> = phases.iter().filter_map(|p| f(p)).collect();
    #[allow(clippy::cast_precision_loss)]
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

#[allow(clippy::cast_precision_loss)]
fn per_job(p: &WirePhase, total: Option<f64>) -> Option<f64> {
    total
        .filter(|_| p.phase.jobs > 0)
        .map(|t| t / p.phase.jobs as f64)
}

fn server_cpu_per_job(p: &WirePhase) -> Option<f64> {
    per_job(p, p.phase.server_cpu_seconds)
}

fn cell(value: Option<f64>, digits: usize) -> String {
    value.map_or_else(|| "–".to_owned(), |v| format!("{v:.digits$}"))
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "–".to_owned(),
    }
}

/// A summary row: its label, the JSON and protobuf phases, the figure, its decimals.
type Row<'a> = (
    &'a str,
    (&'a [&'a WirePhase], &'a [&'a WirePhase]),
    fn(&WirePhase) -> Option<f64>,
    usize,
);

/// results.md: every phase, then each side's means and their ratios.
pub fn markdown(run: &WireRun) -> String {
    let c = &run.config;
    let mut out = format!(
        "# Wire encoding A/B: JSON and protobuf\n\n`{}`\n\n{} jobs of {} pods, all at once, {} at a \
         time, pods completing after {} s; {} cores; {}. {} captured pods without protobuf \
         conversion. Operator flags: `{}`.\n\n",
        run.command,
        c.jobs,
        c.pods_per_job,
        c.concurrency,
        c.complete_after_seconds,
        c.cores,
        c.date,
        run.uncovered_pods,
        c.operator_args.join(" "),
    );
    out.push_str(
        "| phase | load (1/5/15 min) | jobs/s, all pods | jobs/s, Succeeded | API server CPU s/job \
         | operator CPU s/job | operator peak RSS MB | requests/job |\n|---|---|---|---|---|---|---|---|\n",
    );
    for p in &run.phases {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            p.phase.name,
            p.load,
            cell(p.phase.throughput_all_pods, 1),
            cell(p.phase.throughput_succeeded, 1),
            cell(server_cpu_per_job(p), 3),
            cell(per_job(p, p.phase.process.as_ref().map(|s| s.cpu_seconds)), 3),
            cell(p.phase.process.as_ref().map(|s| s.peak_rss_mb), 1),
            cell(p.phase.requests.as_ref().map(|r| r.per_job), 1),
        );
    }
    let side = |encoding: &str, ceiling: bool| -> Vec<&WirePhase> {
        run.phases
            .iter()
            .filter(|p| p.encoding == encoding && p.ceiling == ceiling)
            .collect()
    };
    let (json, protobuf) = (side("json", false), side("protobuf", false));
    let (json_ceiling, protobuf_ceiling) = (side("json", true), side("protobuf", true));
    let all_pods = |p: &WirePhase| p.phase.throughput_all_pods;
    let operator = (json.as_slice(), protobuf.as_slice());
    let ceiling = (json_ceiling.as_slice(), protobuf_ceiling.as_slice());
    let rows: [Row<'_>; 6] = [
        (
            "operator jobs/s, all pods",
            operator,
            |p| p.phase.throughput_all_pods,
            1,
        ),
        (
            "operator jobs/s, Succeeded",
            operator,
            |p| p.phase.throughput_succeeded,
            1,
        ),
        (
            "operator phase: API server CPU s/job",
            operator,
            server_cpu_per_job,
            3,
        ),
        (
            "operator peak RSS MB",
            operator,
            |p| p.phase.process.as_ref().map(|s| s.peak_rss_mb),
            1,
        ),
        (
            "ceiling jobs/s, all pods",
            ceiling,
            |p| p.phase.throughput_all_pods,
            1,
        ),
        (
            "ceiling phase: API server CPU s/job",
            ceiling,
            server_cpu_per_job,
            3,
        ),
    ];
    let _ = write!(
        out,
        "\n## Means over {} pair(s)\n\n| | JSON | protobuf | protobuf / JSON |\n|---|---|---|---|\n",
        json.len()
    );
    for (label, (a, b), f, digits) in rows {
        let (a, b) = (mean(a, f), mean(b, f));
        let _ = writeln!(
            out,
            "| {label} | {} | {} | {} |",
            cell(a, digits),
            cell(b, digits),
            ratio(b, a)
        );
    }
    let (cj, cp) = (mean(&json_ceiling, all_pods), mean(&protobuf_ceiling, all_pods));
    let (oj, op) = (mean(&json, all_pods), mean(&protobuf, all_pods));
    let _ = write!(
        out,
        "\nJobs/s to all pods against each ceiling:\n\n| operator | / JSON ceiling | / protobuf ceiling |\n\
         |---|---|---|\n| JSON | {} | {} |\n| protobuf | {} | {} |\n",
        ratio(oj, cj),
        ratio(oj, cp),
        ratio(op, cj),
        ratio(op, cp),
    );
    let kinds: std::collections::BTreeSet<&String> = run
        .phases
        .iter()
        .filter_map(|p| p.phase.requests.as_ref())
        .flat_map(|r| r.per_job_by_kind.keys())
        .collect();
    out.push_str("\n## Operator requests per job (mean)\n\n| request | JSON | protobuf |\n|---|---|---|\n");
    for kind in kinds {
        let of = |p: &WirePhase| {
            p.phase
                .requests
                .as_ref()
                .and_then(|r| r.per_job_by_kind.get(kind).copied())
        };
        let _ = writeln!(
            out,
            "| {kind} | {} | {} |",
            cell(mean(&json, of), 2),
            cell(mean(&protobuf, of), 2)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{ProcessStats, RequestStats};

    fn phase(encoding: &str, ceiling: bool, rate: f64, server_cpu: f64) -> WirePhase {
        WirePhase {
            encoding: encoding.into(),
            ceiling,
            load: "1.0 1.0 1.0".into(),
            phase: Phase {
                name: format!("{encoding} {ceiling}"),
                jobs: 100,
                throughput_all_pods: Some(rate),
                throughput_succeeded: (!ceiling).then_some(rate / 2.0),
                server_cpu_seconds: Some(server_cpu),
                process: (!ceiling).then_some(ProcessStats {
                    cpu_seconds: 10.0,
                    peak_rss_mb: 40.0,
                    ..ProcessStats::default()
                }),
                requests: (!ceiling).then(|| RequestStats {
                    per_job: 20.0,
                    per_job_by_kind: [("create pods 201".to_owned(), 4.0)].into(),
                    ..RequestStats::default()
                }),
                ..Phase::default()
            },
        }
    }

    #[test]
    fn the_summary_compares_each_side_and_both_ceilings() {
        let run = WireRun {
            phases: vec![
                phase("json", false, 20.0, 10.0),
                phase("protobuf", false, 30.0, 5.0),
                phase("json", true, 40.0, 8.0),
                phase("protobuf", true, 50.0, 4.0),
            ],
            ..WireRun::default()
        };
        let text = markdown(&run);
        assert!(
            text.contains("| operator jobs/s, all pods | 20.0 | 30.0 | 1.50x |"),
            "{text}"
        );
        assert!(
            text.contains("| operator phase: API server CPU s/job | 0.100 | 0.050 | 0.50x |"),
            "{text}"
        );
        assert!(text.contains("| JSON | 0.50x | 0.40x |"), "{text}");
        assert!(text.contains("| protobuf | 0.75x | 0.60x |"), "{text}");
        assert!(text.contains("| create pods 201 | 4.00 | 4.00 |"), "{text}");
    }
}
