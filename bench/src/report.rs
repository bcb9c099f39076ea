//! results.md: the figures of a run as markdown tables, with the targets and whether each was
//! met.
use std::fmt::Write;

use crate::results::{Phase, Run};
use crate::stats::Percentiles;

/// The operator's throughput must reach this share of the ceiling's.
pub const TARGET_CEILING_RATIO: f64 = 0.8;
/// p99 creation -> all pods must stay within this when jobs arrive at half the ceiling's rate.
pub const TARGET_P99_SECONDS: f64 = 1.0;
/// Peak RSS with this many live jobs must stay within [`TARGET_RSS_MB`].
pub const TARGET_LIVE_JOBS: usize = 1000;
pub const TARGET_RSS_MB: f64 = 60.0;
/// Against Kubeflow v1.8.1 at its defaults on the same workload (issue #17): throughput at least
/// this multiple of its, peak RSS at most this share of its.
pub const TARGET_KUBEFLOW_RATIO: f64 = 3.0;
pub const TARGET_KUBEFLOW_RSS_SHARE: f64 = 0.25;
/// Peak RSS with every kind enabled within this share of one kind's.
pub const TARGET_ALL_SCHEMES_RATIO: f64 = 0.10;

/// Whether a target was met, missed, or not measured by this run (and why).
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Met,
    Missed,
    NotMeasured(String),
}

impl Verdict {
    fn from_bool(met: bool) -> Self {
        if met { Self::Met } else { Self::Missed }
    }

    fn cell(&self) -> String {
        match self {
            Self::Met => "met".to_owned(),
            Self::Missed => "**missed**".to_owned(),
            Self::NotMeasured(why) => format!("not measured ({why})"),
        }
    }
}

/// A target row: what, the measured figure, the verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub name: String,
    pub measured: String,
    pub verdict: Verdict,
}

/// The operator's throughput over the ceiling's, to all pods created.
pub fn ceiling_ratio(run: &Run) -> Option<f64> {
    let ceiling = run.ceiling.as_ref()?.throughput_all_pods?;
    Some(run.operator.throughput_all_pods? / ceiling)
}

/// The targets against this run.
pub fn targets(run: &Run) -> Vec<Target> {
    let mut out = Vec::new();
    out.push(match ceiling_ratio(run) {
        Some(ratio) => Target {
            name: format!("throughput >= {TARGET_CEILING_RATIO} x ceiling (creation -> all pods)"),
            measured: format!("{ratio:.2} x"),
            verdict: Verdict::from_bool(ratio >= TARGET_CEILING_RATIO),
        },
        None => Target {
            name: format!("throughput >= {TARGET_CEILING_RATIO} x ceiling (creation -> all pods)"),
            measured: "-".into(),
            verdict: Verdict::NotMeasured("no ceiling phase, or jobs unfinished".into()),
        },
    });
    let p99_name = format!(
        "p99 creation -> all pods <= {TARGET_P99_SECONDS} s with jobs arriving at half the ceiling's rate"
    );
    out.push(match run.paced.as_ref().map(|p| (p.rate, &p.phase)) {
        Some((rate, phase)) => Target {
            name: p99_name,
            measured: phase
                .latency_all_pods
                .map_or_else(|| "-".into(), |p| format!("{:.2} s at {rate:.1} jobs/s", p.p99)),
            verdict: Verdict::from_bool(
                phase.incomplete == 0
                    && phase
                        .latency_all_pods
                        .is_some_and(|p| p.p99 <= TARGET_P99_SECONDS),
            ),
        },
        None => Target {
            name: p99_name,
            measured: "-".into(),
            verdict: Verdict::NotMeasured("run with --paced".into()),
        },
    });
    let rss_name = format!("operator peak RSS <= {TARGET_RSS_MB} MB with {TARGET_LIVE_JOBS} live jobs");
    out.push(match &run.operator.process {
        Some(p) if run.operator.jobs >= TARGET_LIVE_JOBS => Target {
            name: rss_name,
            measured: format!("{:.1} MB peak", p.peak_rss_mb),
            verdict: Verdict::from_bool(p.peak_rss_mb <= TARGET_RSS_MB),
        },
        p => Target {
            name: rss_name,
            measured: p
                .as_ref()
                .map_or_else(|| "-".into(), |p| format!("{:.1} MB peak", p.peak_rss_mb)),
            verdict: Verdict::NotMeasured(format!("{} jobs", run.operator.jobs)),
        },
    });
    let all_name = format!(
        "RSS with every kind enabled within {:.0}% of one",
        TARGET_ALL_SCHEMES_RATIO * 100.0
    );
    let one = run.operator.process.as_ref();
    let all = run.all_schemes.as_ref().and_then(|p| p.process.as_ref());
    out.push(match (one, all) {
        (Some(one), Some(all)) => {
            let idle = all.idle_rss_mb / one.idle_rss_mb - 1.0;
            let peak = all.peak_rss_mb / one.peak_rss_mb - 1.0;
            Target {
                name: all_name,
                measured: format!("idle {:+.1}%, peak {:+.1}%", idle * 100.0, peak * 100.0),
                verdict: Verdict::from_bool(
                    idle <= TARGET_ALL_SCHEMES_RATIO && peak <= TARGET_ALL_SCHEMES_RATIO,
                ),
            }
        }
        _ => Target {
            name: all_name,
            measured: "-".into(),
            verdict: Verdict::NotMeasured("run with --compare-all-schemes".into()),
        },
    });
    let kubeflow = run.kubeflow.as_ref();
    let versus = |f: fn(&Phase) -> Option<f64>| Some(f(&run.operator)? / f(kubeflow?)?);
    let speed_name =
        format!("throughput >= {TARGET_KUBEFLOW_RATIO} x Kubeflow v1.8.1 (creation -> all pods)");
    out.push(match versus(|p| p.throughput_all_pods) {
        Some(ratio) => Target {
            name: speed_name,
            measured: format!("{ratio:.2} x"),
            verdict: Verdict::from_bool(ratio >= TARGET_KUBEFLOW_RATIO),
        },
        None => Target {
            name: speed_name,
            measured: "-".into(),
            verdict: Verdict::NotMeasured("run with --peer kubeflow".into()),
        },
    });
    let memory_name = format!("peak RSS <= {TARGET_KUBEFLOW_RSS_SHARE} x Kubeflow's");
    out.push(match versus(|p| p.process.as_ref().map(|s| s.peak_rss_mb)) {
        Some(share) => Target {
            name: memory_name,
            measured: format!("{share:.2} x"),
            verdict: Verdict::from_bool(share <= TARGET_KUBEFLOW_RSS_SHARE),
        },
        None => Target {
            name: memory_name,
            measured: "-".into(),
            verdict: Verdict::NotMeasured("run with --peer kubeflow".into()),
        },
    });
    out
}

fn rate_label(rate: f64) -> String {
    if rate > 0.0 {
        format!("{rate} jobs/s")
    } else {
        "all at once".to_owned()
    }
}

fn num(value: Option<f64>, digits: usize) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
}

fn pct(p: Option<Percentiles>) -> String {
    p.map_or_else(
        || "-".to_owned(),
        |p| format!("{:.2} / {:.2} / {:.2}", p.p50, p.p90, p.p99),
    )
}

/// The markdown report.
pub fn markdown(run: &Run) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# kfop scale benchmark\n");
    md.push_str(&summary(run, "##"));
    let settings = settings_table(run);
    if !settings.is_empty() {
        let _ = writeln!(md, "\n## At each other's settings\n\n{settings}");
    }
    if let Some(requests) = &run.operator.requests {
        let _ = writeln!(
            md,
            "\n## Operator API requests per job ({})\n\n| verb resource code | per job |\n|---|---|",
            run.operator.name
        );
        for (kind, per_job) in &requests.per_job_by_kind {
            let _ = writeln!(md, "| {kind} | {per_job:.2} |");
        }
    }
    let _ = writeln!(
        md,
        "\nPlots: [latency.svg](latency.svg) (per-job latency by submission time), \
         [rss.svg](rss.svg) (operator RSS over time). Raw data: results.json (summary.json without per-job timelines and samples)."
    );
    md
}

/// kfop and Kubeflow each at its own defaults and at the other's settings (a run with
/// `--equal-settings`), one row each, with the operator's own client limits after them: the
/// comparison at equal settings. Empty when the run has none of it.
pub fn settings_table(run: &Run) -> String {
    let Some(kubeflow) = run.kubeflow.as_ref() else {
        return String::new();
    };
    let c = &run.config;
    let first = if c.operator_args.is_empty() {
        format!(
            "operator at its defaults ({} threads, no client limit)",
            c.concurrency
        )
    } else {
        run.operator.name.clone()
    };
    let rows: Vec<(String, &Phase)> = [(first, &run.operator)]
        .into_iter()
        .chain(run.settings.iter().map(|p| (p.name.clone(), p)))
        .chain([(
            "Kubeflow v1.8.1 at its defaults (1 thread, QPS 20, burst 30)".to_owned(),
            kubeflow,
        )])
        .chain(run.kubeflow_matched.iter().map(|p| (p.name.clone(), p)))
        .collect();
    if rows.len() < 3 {
        return String::new();
    }
    let mut md = String::from(
        "| operator, settings | jobs/s to all pods | jobs/s to Succeeded | creation -> Succeeded p50 / p99 (s) | API requests per job | CPU (s) | peak RSS (MB) |\n|---|---|---|---|---|---|---|\n",
    );
    for (name, p) in rows {
        let _ = writeln!(
            md,
            "| {name} | {} | {} | {} | {} | {} | {} |",
            num(p.throughput_all_pods, 1),
            num(p.throughput_succeeded, 1),
            p.latency_succeeded
                .map_or_else(|| "-".to_owned(), |l| format!("{:.1} / {:.1}", l.p50, l.p99)),
            num(p.requests.as_ref().map(|r| r.per_job), 1),
            num(p.process.as_ref().map(|s| s.cpu_seconds), 1),
            num(p.process.as_ref().map(|s| s.peak_rss_mb), 1),
        );
    }
    md
}

/// The workload, the phases' figures side by side with the operator's as ratios of each
/// baseline, and the targets; `heading` is the markdown level of the targets' heading.
fn summary(run: &Run, heading: &str) -> String {
    let c = &run.config;
    let mut md = String::new();
    let _ = writeln!(
        md,
        "{} PyTorchJobs ({} pods each: 1 master + {} workers), submitted {}; each pod runs {} s \
         on {} kwok nodes; operator `--enable-scheme {}` `--controller-threads {}`{}; \
         ceiling concurrency {} jobs.{} {} cores, {}.\n",
        c.jobs,
        c.pods_per_job,
        c.pods_per_job.saturating_sub(1),
        rate_label(c.rate),
        c.complete_after_seconds,
        c.nodes,
        c.schemes.join(","),
        c.concurrency,
        if c.operator_args.is_empty() {
            String::new()
        } else {
            format!(" `{}`", c.operator_args.join(" "))
        },
        c.concurrency,
        if c.lean_plane {
            " Plane without per-Service work (`--lean-plane`: no endpoints or EndpointSlice \
             controllers, no default topology spreading)."
        } else {
            ""
        },
        c.cores,
        c.date,
    );

    let mut phases: Vec<&Phase> = vec![&run.operator];
    phases.extend(run.ceiling.as_ref());
    phases.extend(&run.replay);
    phases.extend(run.all_schemes.as_ref());
    phases.extend(run.paced.as_ref().map(|p| &p.phase));
    phases.extend(&run.settings);
    phases.extend(run.kubeflow.as_ref());
    phases.extend(run.kubeflow_matched.as_ref());
    // The operator's figures as ratios against each baseline of the same run.
    let baselines: Vec<(&str, &Phase)> = run
        .ceiling
        .iter()
        .map(|p| ("ceiling", p))
        .chain(run.replay.iter().map(|p| (p.name.as_str(), p)))
        .chain(run.kubeflow.iter().map(|p| ("Kubeflow", p)))
        .chain(
            run.kubeflow_matched
                .iter()
                .map(|p| ("Kubeflow at kfop's settings", p)),
        )
        .collect();
    let _ = write!(md, "| |");
    for p in &phases {
        let _ = write!(md, " {} |", p.name);
    }
    for (label, _) in &baselines {
        let _ = write!(md, " operator / {label} |");
    }
    let _ = writeln!(md);
    let _ = writeln!(md, "|---|{}", "---|".repeat(phases.len() + baselines.len()));
    let ratio = |f: fn(&Phase) -> Option<f64>| {
        baselines
            .iter()
            .map(|(_, base)| match (f(&run.operator), f(base)) {
                (Some(o), Some(b)) if b > 0.0 => format!(" {:.2} |", o / b),
                _ => " - |".to_owned(),
            })
            .collect::<String>()
    };
    let mut row = |label: &str, cell: &dyn Fn(&Phase) -> String, tail: String| {
        let _ = write!(md, "| {label} |");
        for p in &phases {
            let _ = write!(md, " {} |", cell(p));
        }
        let _ = writeln!(md, "{tail}");
    };
    let no_tail = || " |".repeat(baselines.len());
    row(
        "jobs/s, creation -> all pods exist",
        &|p| num(p.throughput_all_pods, 1),
        ratio(|p| p.throughput_all_pods),
    );
    row(
        "jobs/s, creation -> Succeeded",
        &|p| num(p.throughput_succeeded, 1),
        no_tail(),
    );
    row(
        "creation -> all pods exist, p50 / p90 / p99 (s)",
        &|p| pct(p.latency_all_pods),
        no_tail(),
    );
    row(
        "creation -> all pods Running, p50 / p90 / p99 (s)",
        &|p| pct(p.latency_running),
        no_tail(),
    );
    row(
        "creation -> Succeeded, p50 / p90 / p99 (s)",
        &|p| pct(p.latency_succeeded),
        no_tail(),
    );
    row(
        "operator CPU (s)",
        &|p| num(p.process.as_ref().map(|s| s.cpu_seconds), 1),
        ratio(|p| p.process.as_ref().map(|s| s.cpu_seconds)),
    );
    row(
        "operator RSS idle / peak / end (MB)",
        &|p| {
            p.process.as_ref().map_or_else(
                || "-".to_owned(),
                |s| {
                    format!(
                        "{:.1} / {:.1} / {:.1}",
                        s.idle_rss_mb, s.peak_rss_mb, s.end_rss_mb
                    )
                },
            )
        },
        ratio(|p| p.process.as_ref().map(|s| s.peak_rss_mb)),
    );
    row(
        "operator memory per live job, (peak - idle) / jobs (kB)",
        &|p| num(p.process.as_ref().and_then(|s| s.kb_per_job(p.jobs)), 1),
        ratio(|p| p.process.as_ref().and_then(|s| s.kb_per_job(p.jobs))),
    );
    row(
        "API requests per job",
        &|p| num(p.requests.as_ref().map(|r| r.per_job), 1),
        ratio(|p| p.requests.as_ref().map(|r| r.per_job)),
    );
    row(
        "reconciles per job",
        &|p| num(p.requests.as_ref().map(|r| r.reconciles_per_job), 1),
        no_tail(),
    );
    row(
        "mean reconcile time (s)",
        &|p| num(p.requests.as_ref().map(|r| r.reconcile_mean_seconds), 3),
        no_tail(),
    );
    row(
        "client rate-limiter wait, summed (s)",
        &|p| num(p.requests.as_ref().and_then(|r| r.rate_limiter_wait_seconds), 1),
        no_tail(),
    );
    row(
        "jobs not finished in time",
        &|p| p.incomplete.to_string(),
        no_tail(),
    );

    let _ = writeln!(md, "\n{heading} Targets\n");
    let _ = writeln!(md, "| target | measured | result |\n|---|---|---|");
    for t in targets(run) {
        let _ = writeln!(md, "| {} | {} | {} |", t.name, t.measured, t.verdict.cell());
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Paced, ProcessStats, RequestStats, RunConfig};

    fn phase(name: &str, throughput: f64, p99: f64, rss: f64) -> Phase {
        Phase {
            name: name.into(),
            jobs: 1000,
            throughput_all_pods: Some(throughput),
            latency_all_pods: Some(Percentiles {
                count: 1000,
                p50: p99 / 2.0,
                p90: p99 / 1.5,
                p99,
                max: p99,
            }),
            process: Some(ProcessStats {
                cpu_seconds: 12.0,
                idle_rss_mb: rss / 2.0,
                peak_rss_mb: rss,
                end_rss_mb: rss,
            }),
            requests: Some(RequestStats {
                total: 20000.0,
                per_job: 20.0,
                per_job_by_kind: [("create pods 201".to_owned(), 4.0)].into(),
                ..RequestStats::default()
            }),
            ..Phase::default()
        }
    }

    fn run(rate: f64) -> Run {
        Run {
            config: RunConfig {
                jobs: 1000,
                pods_per_job: 4,
                rate,
                concurrency: 4,
                schemes: vec!["pytorchjob".into()],
                ..RunConfig::default()
            },
            operator: phase("operator (pytorchjob)", 40.0, 1.5, 50.0),
            ceiling: Some(Phase {
                process: None,
                requests: None,
                ..phase("ceiling", 45.0, 1.0, 0.0)
            }),
            replay: Vec::new(),
            all_schemes: Some(phase("operator (all kinds)", 39.0, 1.6, 56.0)),
            kubeflow: Some(phase("Kubeflow", 10.0, 5.0, 229.0)),
            paced: Some(Paced {
                rate: 22.5,
                phase: phase("operator at 22.5 jobs/s", 22.0, 1.2, 50.0),
            }),
            settings: Vec::new(),
            kubeflow_matched: None,
        }
    }

    #[test]
    fn verdicts() {
        let t = targets(&run(0.0));
        let verdicts: Vec<_> = t.iter().map(|t| t.verdict.clone()).collect();
        assert_eq!(
            verdicts,
            vec![
                Verdict::Met,
                Verdict::Missed,
                Verdict::Met,
                Verdict::Missed,
                Verdict::Met,
                Verdict::Met
            ],
            "{t:?}"
        );
        assert_eq!(
            (t[4].measured.as_str(), t[5].measured.as_str()),
            ("4.00 x", "0.22 x")
        );
        assert_eq!(t[0].measured, "0.89 x");
        assert_eq!(t[1].measured, "1.20 s at 22.5 jobs/s");
        assert_eq!(t[3].measured, "idle +12.0%, peak +12.0%");

        let mut slow = run(0.0);
        slow.operator.throughput_all_pods = Some(10.0);
        slow.all_schemes = None;
        slow.kubeflow = None;
        slow.paced = None;
        let t = targets(&slow);
        assert_eq!(t[0].verdict, Verdict::Missed);
        assert!(matches!(t[1].verdict, Verdict::NotMeasured(_)));
        assert!(matches!(t[3].verdict, Verdict::NotMeasured(_)));
        assert!(matches!(t[4].verdict, Verdict::NotMeasured(_)));
    }

    /// Where docs/benchmarks.md shows a run's summary, regenerated from the committed results.
    const DOC_BEGIN: &str = "<!-- scale results: generated from bench/results/burst/summary.json by `KFOP_BLESS=1 cargo test -p kfop-bench benchmarks_doc` -->";
    const DOC_END: &str = "<!-- end of scale results -->";
    /// Where it shows kfop and Kubeflow at each other's settings.
    const EQUAL_BEGIN: &str = "<!-- equal settings: generated from bench/results/kubeflow-equal/summary.json by `KFOP_BLESS=1 cargo test -p kfop-bench benchmarks_doc` -->";
    const EQUAL_END: &str = "<!-- end of equal settings -->";

    /// The workload sentence of a run's summary.
    fn workload(run: &Run) -> String {
        let summary = summary(run, "####");
        summary.lines().next().unwrap_or_default().to_owned()
    }

    /// Checks (or, with `KFOP_BLESS`, rewrites) the block of docs/benchmarks.md between `begin`
    /// and `end` against `render` of the committed run `summary`.
    fn check_doc_block(begin: &str, end: &str, summary: &str, render: fn(&Run) -> String) {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let json = std::fs::read_to_string(root.join(summary)).unwrap();
        let section = format!("{begin}\n{}{end}", render(&serde_json::from_str(&json).unwrap()));
        let path = root.join("docs/benchmarks.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let start = doc
            .find(begin)
            .unwrap_or_else(|| panic!("docs/benchmarks.md has no {begin}"));
        let stop = doc
            .find(end)
            .unwrap_or_else(|| panic!("docs/benchmarks.md has no {end}"))
            + end.len();
        if std::env::var_os("KFOP_BLESS").is_some() {
            std::fs::write(&path, format!("{}{section}{}", &doc[..start], &doc[stop..])).unwrap();
            return;
        }
        assert!(
            doc[start..stop] == section,
            "docs/benchmarks.md's block is not {summary}'s: run KFOP_BLESS=1 cargo test -p \
             kfop-bench benchmarks_doc\n{section}"
        );
    }

    /// docs/benchmarks.md's scale section is the committed burst run's, rendered; bless to
    /// regenerate.
    #[test]
    fn benchmarks_doc_shows_the_committed_results() {
        check_doc_block(DOC_BEGIN, DOC_END, "bench/results/burst/summary.json", |run| {
            summary(run, "####")
        });
    }

    /// docs/benchmarks.md's comparison at equal settings is the committed run's, rendered.
    #[test]
    fn benchmarks_doc_shows_the_committed_equal_settings() {
        check_doc_block(
            EQUAL_BEGIN,
            EQUAL_END,
            "bench/results/kubeflow-equal/summary.json",
            |run| format!("{}\n\n{}", workload(run), settings_table(run)),
        );
    }

    #[test]
    fn equal_settings_are_phases_a_baseline_and_a_table() {
        let mut equal = run(0.0);
        assert_eq!(settings_table(&equal), "", "no phase at the other's settings");
        equal.settings = vec![phase("operator at Kubeflow's defaults", 2.0, 9.0, 40.0)];
        equal.kubeflow_matched = Some(phase("Kubeflow at kfop's settings", 20.0, 2.0, 300.0));
        let md = markdown(&equal);
        assert!(
            md.contains(
                "| jobs/s, creation -> all pods exist | 40.0 | 45.0 | 39.0 | 22.0 | 2.0 | 10.0 | 20.0 | 0.89 | 4.00 | 2.00 |"
            ),
            "{md}"
        );
        assert!(md.contains("| operator / Kubeflow | operator / Kubeflow at kfop's settings |"));
        let table = settings_table(&equal);
        assert_eq!(table.lines().count(), 2 + 4, "{table}");
        assert!(
            table.contains("| operator at its defaults (4 threads, no client limit) | 40.0 |"),
            "{table}"
        );
        assert!(
            table.contains("| operator at Kubeflow's defaults | 2.0 | - | - | 20.0 | 12.0 | 40.0 |"),
            "{table}"
        );
        assert!(md.contains("## At each other's settings"));
    }

    #[test]
    fn memory_per_live_job_is_the_growth_over_idle() {
        let p = phase("operator", 40.0, 1.0, 50.0);
        let kb = p.process.as_ref().and_then(|s| s.kb_per_job(p.jobs));
        assert_eq!(kb, Some(25.0), "(50 - 25) MB over 1000 jobs");
        assert!(
            markdown(&run(0.0))
                .contains("| operator memory per live job, (peak - idle) / jobs (kB) | 25.0 |")
        );
    }

    #[test]
    fn a_replay_is_a_phase_and_a_baseline() {
        let mut with_replay = run(0.0);
        with_replay.replay = vec![Phase {
            process: None,
            requests: None,
            ..phase("replay", 50.0, 1.0, 0.0)
        }];
        let md = markdown(&with_replay);
        assert!(
            md.contains(
                "| jobs/s, creation -> all pods exist | 40.0 | 45.0 | 50.0 | 39.0 | 22.0 | 10.0 | 0.89 | 0.80 | 4.00 |"
            ),
            "{md}"
        );
        assert!(md.contains("| operator / ceiling | operator / replay | operator / Kubeflow |"));
    }

    #[test]
    fn markdown_has_every_phase_and_target() {
        let md = markdown(&run(0.0));
        assert!(md.starts_with("# kfop scale benchmark"));
        assert!(
            md.contains(
                "| | operator (pytorchjob) | ceiling | operator (all kinds) | operator at 22.5 jobs/s | Kubeflow | operator / ceiling | operator / Kubeflow |"
            )
        );
        assert!(
            md.contains(
                "| jobs/s, creation -> all pods exist | 40.0 | 45.0 | 39.0 | 22.0 | 10.0 | 0.89 | 4.00 |"
            ),
            "{md}"
        );
        assert!(md.contains("| create pods 201 | 4.00 |"));
        assert!(md.contains("## Targets"));
        assert!(!md.contains("replay"));
        // Every table row has the same number of cells as its header.
        let header_cells = md
            .lines()
            .find(|l| l.starts_with("| |"))
            .map(|l| l.matches('|').count());
        for line in md.lines().filter(|l| l.starts_with("| ") && l.contains("(s)")) {
            assert_eq!(Some(line.matches('|').count()), header_cells, "{line}");
        }
    }
}
