//! Per-job milestones, in seconds since a phase started: submitted, every pod exists, every pod
//! runs, the job Succeeded. Fed by [`crate::observe`]; pure so it can be tested.
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// What one job reached and when.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobMarks {
    /// When the job (or, in the ceiling, its first object) was sent to the API server.
    pub submitted: Option<f64>,
    /// When the last of its pods was first seen.
    pub all_pods: Option<f64>,
    /// When the last of its pods was first seen Running (or already finished).
    pub all_running: Option<f64>,
    /// When its Succeeded condition was first seen.
    pub succeeded: Option<f64>,
    /// Seen without Succeeded=True, or with Running=True, after it had succeeded.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub regressed: bool,
    #[serde(skip)]
    pods: BTreeSet<String>,
    #[serde(skip)]
    running: BTreeSet<String>,
}

/// The milestones of every job of a phase.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Timeline {
    pub pods_per_job: usize,
    pub jobs: BTreeMap<String, JobMarks>,
}

/// How far a pod has got, from its phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodProgress {
    /// Pending (or no phase yet): it exists.
    Exists,
    /// Running, Succeeded or Failed: it has run.
    Ran,
}

impl PodProgress {
    pub fn of_phase(phase: &str) -> Self {
        match phase {
            "Running" | "Succeeded" | "Failed" => Self::Ran,
            _ => Self::Exists,
        }
    }
}

impl Timeline {
    pub fn new(pods_per_job: usize) -> Self {
        Self {
            pods_per_job,
            jobs: BTreeMap::new(),
        }
    }

    /// Records the first submission time of `job`.
    pub fn submitted(&mut self, job: &str, at: f64) {
        let marks = self.jobs.entry(job.to_owned()).or_default();
        marks.submitted.get_or_insert(at);
    }

    /// Records a pod of `job` seen at `at`.
    pub fn pod(&mut self, job: &str, pod: &str, progress: PodProgress, at: f64) {
        let want = self.pods_per_job;
        let marks = self.jobs.entry(job.to_owned()).or_default();
        if marks.pods.insert(pod.to_owned()) && marks.pods.len() == want {
            marks.all_pods.get_or_insert(at);
        }
        if progress == PodProgress::Ran && marks.running.insert(pod.to_owned()) && marks.running.len() == want
        {
            marks.all_running.get_or_insert(at);
        }
    }

    /// Records `job`'s Succeeded and Running conditions as seen at `at`: a job seen succeeded
    /// once must stay so (a finished job is never resurrected).
    pub fn job_seen(&mut self, job: &str, succeeded: bool, running: bool, at: f64) {
        let marks = self.jobs.entry(job.to_owned()).or_default();
        if marks.succeeded.is_some() && (!succeeded || running) {
            marks.regressed = true;
        }
        if succeeded {
            marks.succeeded.get_or_insert(at);
        }
    }

    /// Submitted jobs that left Succeeded after reaching it.
    pub fn regressed(&self) -> Vec<String> {
        self.jobs
            .iter()
            .filter(|(_, m)| m.submitted.is_some() && m.regressed)
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// How many submitted jobs reached a milestone.
    pub fn count(&self, milestone: impl Fn(&JobMarks) -> Option<f64>) -> usize {
        self.jobs
            .values()
            .filter(|m| m.submitted.is_some() && milestone(m).is_some())
            .count()
    }

    /// Milestones of the submitted jobs, in submission order.
    pub fn submitted_jobs(&self) -> Vec<&JobMarks> {
        let mut jobs: Vec<&JobMarks> = self.jobs.values().filter(|m| m.submitted.is_some()).collect();
        jobs.sort_by(|a, b| {
            a.submitted
                .unwrap_or_default()
                .total_cmp(&b.submitted.unwrap_or_default())
        });
        jobs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milestones_are_the_last_pod_and_first_sighting() {
        let mut t = Timeline::new(2);
        t.submitted("a", 0.0);
        t.submitted("a", 9.0);
        t.pod("a", "a-0", PodProgress::Exists, 1.0);
        t.pod("a", "a-0", PodProgress::Exists, 1.5);
        assert_eq!(t.jobs["a"].all_pods, None);
        t.pod("a", "a-1", PodProgress::Exists, 2.0);
        t.pod("a", "a-0", PodProgress::Ran, 3.0);
        t.pod("a", "a-1", PodProgress::Ran, 4.0);
        t.pod("a", "a-1", PodProgress::Ran, 5.0);
        t.job_seen("a", true, false, 6.0);
        t.job_seen("a", true, false, 7.0);
        let a = &t.jobs["a"];
        assert_eq!(
            (a.submitted, a.all_pods, a.all_running, a.succeeded),
            (Some(0.0), Some(2.0), Some(4.0), Some(6.0))
        );
    }

    #[test]
    fn a_pod_first_seen_running_counts_for_both() {
        let mut t = Timeline::new(1);
        t.submitted("b", 0.5);
        t.pod("b", "b-0", PodProgress::of_phase("Succeeded"), 1.0);
        assert_eq!(t.jobs["b"].all_pods, Some(1.0));
        assert_eq!(t.jobs["b"].all_running, Some(1.0));
        assert_eq!(PodProgress::of_phase("Pending"), PodProgress::Exists);
    }

    #[test]
    fn leaving_succeeded_is_a_regression() {
        let mut t = Timeline::new(1);
        for job in ["kept", "lost", "rerun", "unsubmitted"] {
            if job != "unsubmitted" {
                t.submitted(job, 0.0);
            }
            t.job_seen(job, false, true, 1.0);
            t.job_seen(job, true, false, 2.0);
        }
        t.job_seen("kept", true, false, 3.0);
        t.job_seen("lost", false, false, 3.0);
        t.job_seen("rerun", true, true, 3.0);
        t.job_seen("unsubmitted", false, false, 3.0);
        assert_eq!(t.regressed(), ["lost", "rerun"]);
        assert_eq!(t.jobs["kept"].succeeded, Some(2.0));
    }

    #[test]
    fn counts_only_submitted_jobs_in_order() {
        let mut t = Timeline::new(1);
        t.pod("stray", "stray-0", PodProgress::Exists, 0.1);
        t.submitted("late", 2.0);
        t.submitted("early", 1.0);
        t.pod("early", "early-0", PodProgress::Exists, 1.2);
        assert_eq!(t.count(|m| m.all_pods), 1);
        let order: Vec<_> = t.submitted_jobs().iter().map(|m| m.submitted).collect();
        assert_eq!(order, vec![Some(1.0), Some(2.0)]);
    }
}
