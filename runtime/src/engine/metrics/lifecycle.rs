//! Job lifecycle histograms: from a job's creation to all its pods created and to all running,
//! and how long a hold (suspension, gang scheduling) lasted, per kind.
//!
//! Each is observed by the first reconcile that sees the state, measured from the job's
//! `creationTimestamp` to that reconcile's clock, once per job. Only jobs this process saw from
//! their first reconcile (no Created condition yet) are timed: after an operator restart, jobs
//! already under way would otherwise be counted again with the age they had when it came back.
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use k8s_openapi::jiff::Timestamp;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use crate::plan::{Hold, Progress};

/// Seconds, from a pod starting at once to a job queued for a day.
const BUCKETS: [f64; 15] = [
    0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 21600.0, 86400.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

/// Labels of `kfop_job_held_seconds`: the kind and what held the job (`suspended`, `gang`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HeldLabels {
    kind: String,
    reason: &'static str,
}

fn reason(hold: Hold) -> &'static str {
    match hold {
        Hold::Suspended => "suspended",
        Hold::Gang => "gang",
    }
}

/// What has been recorded of one job.
#[derive(Debug)]
struct Job {
    kind: String,
    created: Timestamp,
    pods_created: bool,
    pods_running: bool,
    /// The hold under way and when it began.
    held: Option<(Hold, Timestamp)>,
}

type Histograms<L> = Family<L, Histogram>;

fn histograms<L: Clone + std::hash::Hash + Eq>() -> Histograms<L> {
    Family::new_with_constructor(|| Histogram::new(BUCKETS))
}

#[derive(Debug)]
pub(super) struct Lifecycle {
    pods_created: Histograms<KindLabels>,
    pods_running: Histograms<KindLabels>,
    held: Histograms<HeldLabels>,
    /// By job UID, jobs seen from their first reconcile and not finished yet.
    jobs: Mutex<HashMap<String, Job>>,
}

impl Lifecycle {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let this = Self {
            pods_created: histograms(),
            pods_running: histograms(),
            held: histograms(),
            jobs: Mutex::default(),
        };
        registry.register_with_unit(
            "kfop_job_pods_created",
            "Time from a job's creation to the first reconcile that saw every pod of its replicas \
             exist, once per job (an MPIJob's launcher runs in a batch Job and is not counted); \
             only jobs this operator process saw from their first reconcile",
            Unit::Seconds,
            this.pods_created.clone(),
        );
        registry.register_with_unit(
            "kfop_job_pods_running",
            "Time from a job's creation to the first reconcile that saw every pod of its replicas \
             Running (or already Succeeded), once per job; includes any time held",
            Unit::Seconds,
            this.pods_running.clone(),
        );
        registry.register_with_unit(
            "kfop_job_held",
            "How long a job was held before running its pods, observed when the hold ends: \
             reason=suspended (runPolicy.suspend, e.g. by a queue) or gang (its PodGroup missing \
             or not admitted by the gang scheduler); a hold from the job's creation counts from it",
            Unit::Seconds,
            this.held.clone(),
        );
        this
    }

    /// Records what `progress` shows of the job `uid` of `kind`, created at `created`, that
    /// was not recorded yet, as seen at `now`.
    pub(super) fn observe(
        &self,
        kind: &str,
        uid: &str,
        created: Timestamp,
        progress: Progress,
        now: Timestamp,
    ) {
        let Ok(mut jobs) = self.jobs.lock() else {
            return;
        };
        let first = !jobs.contains_key(uid);
        if first && !progress.first_pass {
            return;
        }
        let job = jobs.entry(uid.to_owned()).or_insert_with(|| Job {
            kind: kind.to_owned(),
            created,
            pods_created: false,
            pods_running: false,
            held: None,
        });
        let seconds = |since: Timestamp| now.duration_since(since).as_secs_f64().max(0.0);
        let labels = || KindLabels {
            kind: kind.to_owned(),
        };
        if let Some((hold, since)) = job.held
            && progress.held != Some(hold)
        {
            self.held
                .get_or_create(&HeldLabels {
                    kind: kind.to_owned(),
                    reason: reason(hold),
                })
                .observe(seconds(since));
            job.held = None;
        }
        if let Some(hold) = progress.held
            && job.held.is_none()
        {
            // Held at its first reconcile (created suspended, as queues create jobs): since creation.
            job.held = Some((hold, if first { job.created } else { now }));
        }
        if progress.pods_created && !job.pods_created {
            job.pods_created = true;
            self.pods_created
                .get_or_create(&labels())
                .observe(seconds(job.created));
        }
        if progress.pods_running && !job.pods_running {
            job.pods_running = true;
            self.pods_running
                .get_or_create(&labels())
                .observe(seconds(job.created));
        }
        if progress.finished {
            jobs.remove(uid);
        }
    }

    pub(super) fn forget(&self, uid: &str) {
        if let Ok(mut jobs) = self.jobs.lock() {
            jobs.remove(uid);
        }
    }

    /// Forgets the jobs of `kind` not in `live` (UIDs).
    pub(super) fn retain(&self, kind: &str, live: &HashSet<String>) {
        if let Ok(mut jobs) = self.jobs.lock() {
            jobs.retain(|uid, job| job.kind != kind || live.contains(uid));
        }
    }

    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.jobs.lock().map_or(0, |jobs| jobs.len())
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::SignedDuration;

    use super::*;

    fn encode(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        text
    }

    fn value(text: &str, series: &str) -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
    }

    #[test]
    fn each_stage_is_timed_once_from_creation_and_holds_when_they_end() {
        let mut registry = Registry::default();
        let lifecycle = Lifecycle::register(&mut registry);
        let t0 = Timestamp::now();
        let at = |secs: i64| t0 + SignedDuration::from_secs(secs);
        let step = |p: Progress, secs| lifecycle.observe("PyTorchJob", "a", t0, p, at(secs));
        let held = Progress {
            first_pass: true,
            held: Some(Hold::Suspended),
            ..Progress::default()
        };
        step(held, 1);
        step(
            Progress {
                first_pass: false,
                ..held
            },
            5,
        );
        step(Progress::default(), 10);
        let created = Progress {
            pods_created: true,
            ..Progress::default()
        };
        step(created, 12);
        step(created, 13);
        step(
            Progress {
                held: Some(Hold::Gang),
                ..created
            },
            14,
        );
        step(
            Progress {
                pods_running: true,
                ..created
            },
            20,
        );
        step(
            Progress {
                pods_running: true,
                ..created
            },
            21,
        );
        step(
            Progress {
                finished: true,
                ..Progress::default()
            },
            30,
        );
        let text = encode(&registry);
        let kind = r#"{kind="PyTorchJob"}"#;
        assert_eq!(
            value(&text, &format!("kfop_job_pods_created_seconds_count{kind}")),
            1.0
        );
        assert_eq!(
            value(&text, &format!("kfop_job_pods_created_seconds_sum{kind}")),
            12.0
        );
        assert_eq!(
            value(&text, &format!("kfop_job_pods_running_seconds_sum{kind}")),
            20.0
        );
        let suspended = r#"{kind="PyTorchJob",reason="suspended"}"#;
        assert_eq!(
            value(&text, &format!("kfop_job_held_seconds_sum{suspended}")),
            10.0,
            "created suspended"
        );
        let gang = r#"{kind="PyTorchJob",reason="gang"}"#;
        assert_eq!(value(&text, &format!("kfop_job_held_seconds_sum{gang}")), 6.0);
        assert_eq!(lifecycle.tracked(), 0, "a finished job is forgotten");
    }

    #[test]
    fn jobs_under_way_before_this_process_are_not_timed() {
        let mut registry = Registry::default();
        let lifecycle = Lifecycle::register(&mut registry);
        let t0 = Timestamp::now();
        let running = Progress {
            pods_created: true,
            pods_running: true,
            ..Progress::default()
        };
        lifecycle.observe("TFJob", "old", t0, running, t0 + SignedDuration::from_hours(3));
        assert!(!encode(&registry).contains("kfop_job_pods_running_seconds_count"));
        assert_eq!(lifecycle.tracked(), 0);

        let fresh = Progress {
            first_pass: true,
            ..Progress::default()
        };
        lifecycle.observe("TFJob", "new", t0, fresh, t0);
        lifecycle.observe("MPIJob", "mpi", t0, fresh, t0);
        lifecycle.retain("TFJob", &HashSet::new());
        assert_eq!(
            lifecycle.tracked(),
            1,
            "only the TFJob controller's gone job goes"
        );
        lifecycle.forget("mpi");
        assert_eq!(lifecycle.tracked(), 0);
    }
}
