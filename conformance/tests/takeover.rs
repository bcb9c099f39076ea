#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::print_stdout)]
//! kfop takes over from Kubeflow under live jobs and hands back, in both ways a cluster runs
//! Kubeflow today (training-operator v1.8.1 alone; with mpi-operator v0.6.0), each against a
//! control run where Kubeflow keeps running ([`kfop_conformance::takeover`]). What must hold,
//! printed per scenario and asserted: no pod or service recreated, no field of a stored job
//! lost to the other CRDs, no condition regressed, every step's snapshot as the control run's
//! but for declared differences, a deadline counted from Kubeflow's startTime, MPIJobs
//! training-operator created as v1 marked so and stored as v2beta1 after `migrate-storage`,
//! and storedVersions as each operator's CRD needs.
//!
//! Scenario A's two runs and B's two run side by side; each scenario's control run comes before
//! its takeover run (mpi-operator's health port is a constant: one at a time).
use std::time::{Duration, Instant};

use kfop_conformance::allowed::AllowedDifferences;
use kfop_conformance::report::Report;
use kfop_conformance::takeover::{self, Handover, Mode, Planned, RunRecord, Scenario};
use kfop_conformance::{operators, runner};
use kfop_testenv::{Assets, PeerBuild, peer};

/// Jobs each scenario must start at least.
const MIN_JOBS: usize = 40;

/// How much later than its own deadline (or than the operator's start, when that came later) a
/// job may be failed: a reconcile and a status write on a loaded plane.
const DEADLINE_SLACK: Duration = Duration::from_secs(6);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kfop_takes_over_from_kubeflow_under_live_jobs_and_hands_back() {
    let started = Instant::now();
    let bin = tokio::task::spawn_blocking(|| {
        Assets::locate_or_build().unwrap();
        for peer in [peer::TRAINING_OPERATOR, peer::MPI_OPERATOR_V0_6_0] {
            PeerBuild::locate_or_build(peer).unwrap();
        }
        operators::operator_bin().unwrap()
    })
    .await
    .unwrap();
    let built = started.elapsed();
    let options = runner::Options::default();
    let allowed = AllowedDifferences::load(&options.allowed_file).unwrap();

    let scenarios = Scenario::ALL.map(|scenario| {
        let planned = takeover::plan(&takeover::cases_dir(), scenario).unwrap();
        assert!(
            planned.len() >= MIN_JOBS,
            "{}: {} jobs, want at least {MIN_JOBS}",
            scenario.name(),
            planned.len()
        );
        (scenario, planned)
    });
    let runs = futures::future::join_all(scenarios.iter().map(|(scenario, planned)| {
        let bin = bin.clone();
        async move {
            let control = takeover::run(*scenario, Mode::Control, planned, &bin)
                .await
                .unwrap();
            let took = takeover::run(*scenario, Mode::Takeover, planned, &bin)
                .await
                .unwrap();
            (control, took)
        }
    }))
    .await;

    let mut failures = Vec::new();
    for ((scenario, planned), (control, took)) in scenarios.iter().zip(&runs) {
        let versions = [peer::TRAINING_OPERATOR, peer::MPI_OPERATOR_V0_6_0]
            .map(|p| (p, PeerBuild::locate_or_build(p).unwrap().version().to_owned()))
            .to_vec();
        let report = Report::new(
            takeover::records(planned, control, took),
            allowed.clone(),
            versions,
        );
        println!("# {}\n", scenario.name());
        println!(
            "{} jobs ({}); control run {:.0}s, takeover run {:.0}s",
            planned.len(),
            kinds(planned),
            control.elapsed.as_secs_f64(),
            took.elapsed.as_secs_f64()
        );
        let oracle = report.found.len();
        let undeclared = report.failures();
        println!(
            "oracle: {oracle} differences from the control run, {undeclared} undeclared or failed cases\n"
        );
        if undeclared > 0 {
            println!("{}", report.render());
            failures.push(format!(
                "{}: {undeclared} undeclared differences",
                scenario.name()
            ));
        }
        for (label, handover) in [("takeover", &took.takeover), ("hand-back", &took.hand_back)] {
            let handover = handover.as_ref().expect("the takeover run hands over twice");
            print_handover(label, handover);
            for (what, list) in [
                ("recreated", &handover.recreated),
                ("fields lost", &handover.fields_lost),
                ("conditions regressed", &handover.conditions_regressed),
            ] {
                if !list.is_empty() {
                    failures.push(format!("{} {label}: {what}: {list:#?}", scenario.name()));
                }
            }
        }
        check_storage(*scenario, took, &mut failures);
        check_deadlines(*scenario, planned, control, took, &mut failures);
    }
    println!(
        "wall time {:.0}s (builds {:.0}s)",
        started.elapsed().as_secs_f64(),
        built.as_secs_f64()
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

fn kinds(planned: &[Planned]) -> String {
    let mut counts = std::collections::BTreeMap::<&str, usize>::new();
    for p in planned {
        *counts.entry(p.case.kind.key).or_default() += 1;
    }
    counts
        .iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn print_handover(label: &str, h: &Handover) {
    println!(
        "{label}: {} jobs, {} pods, {} services; {} recreated; {} fields lost ({} zero values defaulted); \
         {} conditions regressed; old operator stopped to new one ready {:.1}s",
        h.jobs,
        h.pods,
        h.services,
        h.recreated.len(),
        h.fields_lost.len(),
        h.fields_added.len(),
        h.conditions_regressed.len(),
        h.elapsed.as_secs_f64()
    );
    for line in h.adopted.iter().chain(&h.storage).chain(&h.checks) {
        println!("  {line}");
    }
}

/// After the takeover's migration only v2beta1 is stored and every MPIJob training-operator
/// created as v1 carries its mark in storage; after the hand-back's, only Kubeflow's version.
fn check_storage(scenario: Scenario, took: &RunRecord, failures: &mut Vec<String>) {
    let after = |h: &Option<Handover>| {
        h.as_ref()
            .and_then(|h| {
                h.storage
                    .iter()
                    .find(|l| l.starts_with("status.storedVersions"))
                    .cloned()
            })
            .unwrap_or_default()
    };
    let want = |v: &str| format!("status.storedVersions after: [{v}]");
    if after(&took.takeover) != want("v2beta1") {
        failures.push(format!(
            "{}: takeover storage: {}",
            scenario.name(),
            after(&took.takeover)
        ));
    }
    if after(&took.hand_back) != want(scenario.kubeflow_storage()) {
        failures.push(format!(
            "{}: hand-back storage: {}",
            scenario.name(),
            after(&took.hand_back)
        ));
    }
    let checks = took
        .takeover
        .as_ref()
        .map(|h| h.checks.clone())
        .unwrap_or_default();
    for line in &checks {
        // "<n> of <m> ..." must have n == m.
        let numbers: Vec<&str> = line.split(' ').collect();
        if let Some(i) = numbers.iter().position(|w| *w == "of")
            && numbers.get(i - 1) != numbers.get(i + 1)
        {
            failures.push(format!("{}: {line}", scenario.name()));
        }
    }
    if scenario == Scenario::TrainingOperator && checks.len() != 2 {
        failures.push(format!(
            "{}: MPIJob v1 checks missing: {checks:?}",
            scenario.name()
        ));
    }
}

/// A deadline job failed no later than its deadline after Kubeflow's startTime (or the new
/// operator's start, if that came later) and the slack; as in the control run.
fn check_deadlines(
    scenario: Scenario,
    planned: &[Planned],
    control: &RunRecord,
    took: &RunRecord,
    failures: &mut Vec<String>,
) {
    let ready = took.takeover.as_ref().and_then(|h| h.ready_at);
    for p in planned {
        let Some(deadline) = p.case.job["spec"]["runPolicy"]["activeDeadlineSeconds"].as_u64() else {
            continue;
        };
        let (Some((start, failed)), Some(ready)) = (took.deadlines.get(&p.case.name), ready) else {
            failures.push(format!(
                "{}: {} has no deadline failure",
                scenario.name(),
                p.case.name
            ));
            continue;
        };
        let secs = |a: &k8s_openapi::jiff::Timestamp, b: &k8s_openapi::jiff::Timestamp| {
            b.duration_since(*a).as_secs_f64()
        };
        let due = (deadline as f64).max(secs(start, &ready));
        let fired = secs(start, failed);
        let control_fired = control.deadlines.get(&p.case.name).map(|(s, f)| secs(s, f));
        println!(
            "deadline {}: {deadline}s, failed {fired:.1}s after startTime (kfop ready after {:.1}s; control run {})",
            p.case.name,
            secs(start, &ready),
            control_fired.map_or("-".to_owned(), |s| format!("{s:.1}s"))
        );
        if fired > due + DEADLINE_SLACK.as_secs_f64() {
            failures.push(format!(
                "{}: {} failed {fired:.1}s after startTime, due {due:.1}s",
                scenario.name(),
                p.case.name
            ));
        }
    }
}
