//! The level-triggered safety net: every resync period each live job is planned again from the
//! caches, and a job with work left is reconciled. Work found for a job that no trigger, timer or
//! running reconcile accounts for means an event was lost: it is counted by [`Overdue`] cause and
//! logged.
//!
//! Every trigger is followed from receipt to the start of its reconcile: a job the resync finds
//! work for must have been triggered (else its own watch event was lost), each trigger must start
//! a reconcile within [`QUEUE_BOUND`] (else the controller dropped it), and after a quiet reconcile
//! the caches must not show new work (else a child's event was lost).
use std::time::{Duration, Instant};

use super::per_job::PerJob;
use super::triggers::Owner;

/// How long after a reconcile ends its own writes may still be missing from the caches (a
/// resync seeing them missing then is not a lost event).
pub const CACHE_GRACE: Duration = Duration::from_secs(10);

/// The longest a trigger may wait for its reconcile to start. The controller runs `concurrency`
/// jobs at once, so under a burst a trigger queues; two minutes is far beyond any wait measured
/// (a 1,000-job burst through restarts), yet shorter than the resync period, so a dropped trigger
/// is counted by the next resync instead of being silently healed by it.
pub const QUEUE_BOUND: Duration = Duration::from_secs(120);

/// When each job was last triggered, reconciled and due again, by namespace and name.
pub type Activity = PerJob<Owner, Seen>;

#[derive(Debug, Clone, Copy, Default)]
pub struct Seen {
    /// The oldest trigger no reconcile has started after yet (kept, not overwritten, by later
    /// triggers, so a stream of dropped triggers cannot look forever fresh).
    triggered: Option<Instant>,
    started: Option<Instant>,
    finished: Option<Instant>,
    /// A requeue the controller will honour (timer, stale cache, error retry).
    due: Option<Instant>,
    /// The first child failure no reconcile has started after yet: when the job's reaction
    /// (restart, fail) is written, the time since is the failure reaction latency.
    failed: Option<Instant>,
}

impl Seen {
    /// Whether a trigger waits for a reconcile to start.
    fn pending(&self) -> bool {
        self.triggered
            .is_some_and(|t| self.started.is_none_or(|started| t >= started))
    }
}

// The causes are the metric's label values, so they live with the metric.
pub use crate::metrics::Overdue;

impl PerJob<Owner, Seen> {
    fn update(&self, job: &Owner, f: impl FnOnce(&mut Seen)) {
        if let Some(mut by_job) = self.lock() {
            f(by_job.entry(job.clone()).or_default());
        }
    }

    /// A watch event or resync asked for `job` to be reconciled.
    pub fn triggered(&self, job: &Owner, now: Instant) {
        self.update(job, |s| {
            if !s.pending() {
                s.triggered = Some(now);
            }
        });
    }

    /// A child of `job` failed or went away ([`super::Trigger::failure`]).
    pub fn failed(&self, job: &Owner, now: Instant) {
        self.update(job, |s| {
            s.failed.get_or_insert(now);
        });
    }

    /// A reconcile of `job` that started at `started` has ended: the failure it saw, if any, is
    /// answered (or needed no answer) and forgotten; a failure that arrived while it ran is kept
    /// for the next one.
    pub fn take_failure(&self, job: &Owner, started: Instant) -> Option<Instant> {
        let mut taken = None;
        self.update(job, |s| {
            if s.failed.is_some_and(|f| f <= started) {
                taken = s.failed.take();
            }
        });
        taken
    }

    /// A reconcile of `job` started; returns how long the trigger it serves waited, if one did.
    pub fn started(&self, job: &Owner, now: Instant) -> Option<Duration> {
        let mut waited = None;
        self.update(job, |s| {
            if s.pending() {
                waited = s.triggered.map(|t| now.saturating_duration_since(t));
            }
            s.started = Some(now);
        });
        waited
    }

    /// When a reconcile of `job` last started or was last asked for, whichever is later.
    pub fn last_run(&self, job: &Owner) -> Option<Instant> {
        let seen = self.lock().and_then(|by_job| by_job.get(job).copied())?;
        seen.started.max(seen.triggered)
    }

    /// How many jobs wait for a reconcile to start (the controller's queue depth).
    pub fn pending(&self) -> usize {
        self.lock()
            .map_or(0, |by_job| by_job.values().filter(|s| s.pending()).count())
    }

    /// A reconcile of `job` ended; the controller runs it again after `requeue`, if any.
    pub fn finished(&self, job: &Owner, now: Instant, requeue: Option<Duration>) {
        self.update(job, |s| {
            s.finished = Some(now);
            s.due = requeue.map(|r| now + r);
        });
    }

    /// Whether work found for `job` at `now` should already have been done, and why. `known_since`
    /// is when this controller could first have known the job (the later of its creation and the
    /// controller's start): a job never triggered is given [`CACHE_GRACE`] from then for its
    /// watch event to arrive.
    pub fn overdue(&self, job: &Owner, now: Instant, known_since: Instant) -> Option<Overdue> {
        let seen = self
            .lock()
            .and_then(|by_job| by_job.get(job).copied())
            .unwrap_or_default();
        let since = |t: Instant| now.saturating_duration_since(t);
        if seen.pending() {
            let waited = seen.triggered.map_or(Duration::ZERO, since);
            return (waited >= QUEUE_BOUND).then_some(Overdue::TriggerDropped);
        }
        let Some(started) = seen.started else {
            // Never triggered: nothing is pending and nothing ever ran.
            return (since(known_since) >= CACHE_GRACE).then_some(Overdue::NeverTriggered);
        };
        let running = seen.finished.is_none_or(|finished| started > finished);
        let settling = seen.finished.is_some_and(|f| since(f) < CACHE_GRACE);
        let due = seen.due.is_some_and(|d| since(d) < CACHE_GRACE);
        (!(running || settling || due)).then_some(Overdue::LostEvent)
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
    fn a_failure_is_taken_by_the_first_reconcile_started_after_it() {
        let a = Activity::default();
        let j = job("a");
        let t0 = Instant::now();
        let second = Duration::from_secs(1);
        a.failed(&j, t0 + second);
        a.failed(&j, t0 + 2 * second);
        assert_eq!(a.take_failure(&j, t0), None, "started before the failure: kept");
        assert_eq!(
            a.take_failure(&j, t0 + 3 * second),
            Some(t0 + second),
            "the first failure counts"
        );
        assert_eq!(a.take_failure(&j, t0 + 4 * second), None, "answered once");
    }

    #[test]
    fn work_after_a_quiet_reconcile_is_overdue() {
        let a = Activity::default();
        let t0 = Instant::now();
        let j = job("a");
        a.triggered(&j, t0);
        assert_eq!(a.overdue(&j, t0 + CACHE_GRACE * 2, t0), None, "triggered, queued");
        a.started(&j, t0 + Duration::from_secs(1));
        assert_eq!(a.overdue(&j, t0 + QUEUE_BOUND * 2, t0), None, "still reconciling");
        a.finished(&j, t0 + Duration::from_secs(2), None);
        assert_eq!(
            a.overdue(&j, t0 + Duration::from_secs(3), t0),
            None,
            "caches may lag our writes"
        );
        assert_eq!(
            a.overdue(&j, t0 + Duration::from_secs(2) + CACHE_GRACE, t0),
            Some(Overdue::LostEvent)
        );
    }

    #[test]
    fn a_job_no_trigger_ever_reached_is_overdue_after_the_grace() {
        let a = Activity::default();
        let t0 = Instant::now();
        let j = job("a");
        assert_eq!(
            a.overdue(&j, t0 + CACHE_GRACE / 2, t0),
            None,
            "its event may be on its way"
        );
        assert_eq!(a.overdue(&j, t0 + CACHE_GRACE, t0), Some(Overdue::NeverTriggered));
        // A job the controller knew only lately (it started late) gets the grace from then.
        assert_eq!(a.overdue(&j, t0 + CACHE_GRACE, t0 + CACHE_GRACE / 2), None);
    }

    #[test]
    fn a_trigger_whose_reconcile_never_starts_is_dropped() {
        let a = Activity::default();
        let t0 = Instant::now();
        let j = job("a");
        a.triggered(&j, t0);
        assert_eq!(a.overdue(&j, t0 + QUEUE_BOUND / 2, t0), None, "queued");
        // Later triggers, dropped too, do not make the first look fresh.
        a.triggered(&j, t0 + QUEUE_BOUND / 2);
        assert_eq!(a.overdue(&j, t0 + QUEUE_BOUND, t0), Some(Overdue::TriggerDropped));
        // Dropped after a reconcile too: triggered after the last start, never started again.
        let b = job("b");
        a.started(&b, t0);
        a.finished(&b, t0, None);
        a.triggered(&b, t0 + Duration::from_secs(1));
        a.triggered(&b, t0 + Duration::from_secs(100));
        assert_eq!(
            a.overdue(&b, t0 + Duration::from_secs(1) + QUEUE_BOUND, t0),
            Some(Overdue::TriggerDropped)
        );
        // Served: the next start clears it, and a later trigger starts a new wait.
        assert_eq!(a.pending(), 2, "both wait");
        assert_eq!(
            a.started(&b, t0 + QUEUE_BOUND * 2),
            Some(QUEUE_BOUND * 2 - Duration::from_secs(1)),
            "waited from its first trigger"
        );
        assert_eq!(a.pending(), 1);
        a.triggered(&b, t0 + QUEUE_BOUND * 2);
        assert_eq!(a.overdue(&b, t0 + QUEUE_BOUND * 2 + QUEUE_BOUND / 2, t0), None);
    }

    #[test]
    fn a_pending_trigger_or_timer_is_not_a_lost_event() {
        let a = Activity::default();
        let t0 = Instant::now();
        let j = job("a");
        a.started(&j, t0);
        a.finished(&j, t0, Some(Duration::from_secs(60)));
        assert_eq!(
            a.overdue(&j, t0 + Duration::from_secs(30), t0),
            None,
            "the timer is not due"
        );
        assert_eq!(
            a.overdue(&j, t0 + Duration::from_secs(65), t0),
            None,
            "the timer just fired"
        );
        assert_eq!(
            a.overdue(&j, t0 + Duration::from_secs(60) + CACHE_GRACE, t0),
            Some(Overdue::LostEvent)
        );
        a.triggered(&j, t0 + Duration::from_secs(100));
        assert_eq!(
            a.overdue(&j, t0 + Duration::from_secs(200), t0),
            None,
            "a trigger waits in the queue"
        );
        a.started(&j, t0 + Duration::from_secs(201));
        a.triggered(&j, t0 + Duration::from_secs(202));
        a.finished(&j, t0 + Duration::from_secs(203), None);
        assert_eq!(
            a.overdue(&j, t0 + Duration::from_secs(300), t0),
            None,
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
