//! The level-triggered safety net: every resync period each live job is planned again from the
//! caches, and a job with work left is reconciled. Work found for a job that no trigger, timer or
//! running reconcile accounts for means an event was lost: it is counted and logged.
use std::time::{Duration, Instant};

use super::per_job::PerJob;
use super::triggers::Owner;

/// How long after a reconcile ends its own writes may still be missing from the caches (a
/// resync seeing them missing then is not a lost event).
pub const CACHE_GRACE: Duration = Duration::from_secs(10);

/// When each job was last triggered, reconciled and due again, by namespace and name.
pub type Activity = PerJob<Owner, Seen>;

#[derive(Debug, Clone, Copy, Default)]
pub struct Seen {
    triggered: Option<Instant>,
    started: Option<Instant>,
    finished: Option<Instant>,
    /// A requeue the controller will honour (timer, stale cache, error retry).
    due: Option<Instant>,
}

impl PerJob<Owner, Seen> {
    fn update(&self, job: &Owner, f: impl FnOnce(&mut Seen)) {
        if let Some(mut by_job) = self.lock() {
            f(by_job.entry(job.clone()).or_default());
        }
    }

    /// A watch event or resync asked for `job` to be reconciled.
    pub fn triggered(&self, job: &Owner, now: Instant) {
        self.update(job, |s| s.triggered = Some(now));
    }

    /// A reconcile of `job` started.
    pub fn started(&self, job: &Owner, now: Instant) {
        self.update(job, |s| s.started = Some(now));
    }

    /// A reconcile of `job` ended; the controller runs it again after `requeue`, if any.
    pub fn finished(&self, job: &Owner, now: Instant, requeue: Option<Duration>) {
        self.update(job, |s| {
            s.finished = Some(now);
            s.due = requeue.map(|r| now + r);
        });
    }

    /// Whether work found for `job` at `now` should already have been done: no trigger waits for
    /// a reconcile, none runs, no requeue is due, and the last one ended more than
    /// [`CACHE_GRACE`] ago. A job never reconciled is given the benefit of the doubt.
    pub fn overdue(&self, job: &Owner, now: Instant) -> bool {
        let Some(seen) = self.lock().and_then(|by_job| by_job.get(job).copied()) else {
            return false;
        };
        let (Some(started), Some(finished)) = (seen.started, seen.finished) else {
            return false;
        };
        let waiting = seen.triggered.is_some_and(|t| t >= started);
        let running = started > finished;
        let settling = now.saturating_duration_since(finished) < CACHE_GRACE;
        let due = seen
            .due
            .is_some_and(|d| now.saturating_duration_since(d) < CACHE_GRACE);
        !(waiting || running || settling || due)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn job(name: &str) -> Owner {
        Owner {
            namespace: Some("ns".into()),
            name: name.into(),
        }
    }

    #[test]
    fn work_after_a_quiet_reconcile_is_overdue() {
        let a = Activity::default();
        let t0 = Instant::now();
        let j = job("a");
        assert!(!a.overdue(&j, t0), "never seen");
        a.triggered(&j, t0);
        assert!(
            !a.overdue(&j, t0 + CACHE_GRACE * 2),
            "triggered, never reconciled"
        );
        a.started(&j, t0 + Duration::from_secs(1));
        assert!(!a.overdue(&j, t0 + CACHE_GRACE * 2), "still reconciling");
        a.finished(&j, t0 + Duration::from_secs(2), None);
        assert!(
            !a.overdue(&j, t0 + Duration::from_secs(3)),
            "caches may lag our writes"
        );
        assert!(a.overdue(&j, t0 + Duration::from_secs(2) + CACHE_GRACE));
    }

    #[test]
    fn a_pending_trigger_or_timer_is_not_a_lost_event() {
        let a = Activity::default();
        let t0 = Instant::now();
        let j = job("a");
        a.started(&j, t0);
        a.finished(&j, t0, Some(Duration::from_secs(60)));
        assert!(
            !a.overdue(&j, t0 + Duration::from_secs(30)),
            "the timer is not due"
        );
        assert!(
            !a.overdue(&j, t0 + Duration::from_secs(65)),
            "the timer just fired"
        );
        assert!(a.overdue(&j, t0 + Duration::from_secs(60) + CACHE_GRACE));
        a.triggered(&j, t0 + Duration::from_secs(100));
        assert!(
            !a.overdue(&j, t0 + Duration::from_secs(200)),
            "a trigger waits in the queue"
        );
        a.started(&j, t0 + Duration::from_secs(201));
        a.triggered(&j, t0 + Duration::from_secs(202));
        a.finished(&j, t0 + Duration::from_secs(203), None);
        assert!(
            !a.overdue(&j, t0 + Duration::from_secs(300)),
            "a trigger during the reconcile is still owed one"
        );
    }

    #[test]
    fn gone_jobs_are_forgotten() {
        let a = Activity::default();
        let now = Instant::now();
        a.triggered(&job("a"), now);
        a.triggered(&job("b"), now);
        a.retain(&HashSet::from([job("b")]));
        assert_eq!(a.len(), 1);
        a.retain(&HashSet::new());
        assert!(a.is_empty());
    }
}
