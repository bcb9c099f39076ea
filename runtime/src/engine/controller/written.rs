//! The last status this process wrote per job. A job read from a cache that has not caught up
//! with that write is planned from the written copy instead (acting on the older one could
//! re-emit a transition or undo one), and the write's own watch event triggers no reconcile:
//! the reconcile that wrote it has already planned the job as written ([`super::apply::Next`]).
use std::sync::Arc;

use super::per_job::PerJob;
use crate::packed::PackedJob;

/// A status write, as the server returned the job.
#[derive(Clone)]
pub struct Write {
    resource_version: u64,
    /// The write before, whose event may come after this one was made (a reconcile's two
    /// passes each wrote): it too was planned as written.
    previous: Option<u64>,
    /// The job as written, until the cache shows this version (then the cache's copy is used).
    job: Option<Arc<PackedJob>>,
}

impl std::fmt::Debug for Write {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Write")
            .field("resource_version", &self.resource_version)
            .finish_non_exhaustive()
    }
}

/// By job UID.
pub type Written = PerJob<String, Write>;

/// resourceVersions are opaque in the API contract; the etcd-backed server makes them
/// increasing integers, and anything unparsable is treated as fresh.
fn version(resource_version: Option<&str>) -> Option<u64> {
    resource_version.and_then(|rv| rv.parse().ok())
}

impl PerJob<String, Write> {
    /// Records the status write that returned `job`.
    pub fn record(&self, job_uid: &str, job: Arc<PackedJob>) {
        let Some(resource_version) = version(kube::ResourceExt::resource_version(job.as_ref()).as_deref())
        else {
            return;
        };
        if let Some(mut by_job) = self.lock() {
            let previous = by_job.get(job_uid).map(|w| w.resource_version);
            by_job.insert(
                job_uid.to_owned(),
                Write {
                    resource_version,
                    previous,
                    job: Some(job),
                },
            );
        }
    }

    /// Whether `resource_version` is older than our last write (whose copy is kept until the
    /// cache shows it).
    pub fn is_stale(&self, job_uid: &str, resource_version: Option<&str>) -> bool {
        self.newer_than(job_uid, resource_version).is_some()
    }

    /// The job as we last wrote it, when a cache shows it at the older `resource_version`.
    pub fn newer_than(&self, job_uid: &str, resource_version: Option<&str>) -> Option<Arc<PackedJob>> {
        let seen = version(resource_version)?;
        let by_job = self.lock()?;
        let written = by_job.get(job_uid)?;
        (seen < written.resource_version)
            .then(|| written.job.clone())
            .flatten()
    }

    /// Notes that the cache shows the job at `resource_version`; whether that is the watch event
    /// of our own last write (no reason to reconcile).
    pub fn is_quiet_echo(&self, job_uid: &str, resource_version: Option<&str>) -> bool {
        let Some(seen) = version(resource_version) else {
            return false;
        };
        let Some(mut by_job) = self.lock() else {
            return false;
        };
        let Some(written) = by_job.get_mut(job_uid) else {
            return false;
        };
        if seen >= written.resource_version {
            // The cache has caught up: its copy is the one to plan from.
            written.job = None;
        }
        seen == written.resource_version || Some(seen) == written.previous
    }
}

#[cfg(test)]
mod tests {
    use super::Written;
    use crate::packed::PackedJob;
    use crate::testing::{job, replica};
    use kube::ResourceExt;

    fn written_at(rv: &str) -> std::sync::Arc<PackedJob> {
        let mut j = job("ns", "a", &[("Worker", replica(1, None))]);
        j.metadata.resource_version = Some(rv.to_owned());
        std::sync::Arc::new(PackedJob::pack(j).unwrap())
    }

    #[test]
    fn older_versions_are_stale_and_planned_from_the_written_copy() {
        let w = Written::default();
        assert!(!w.is_stale("a", Some("5")));
        w.record("a", written_at("10"));
        assert!(w.is_stale("a", Some("9")));
        assert_eq!(
            w.newer_than("a", Some("9"))
                .unwrap()
                .resource_version()
                .as_deref(),
            Some("10")
        );
        assert!(!w.is_stale("a", Some("10")));
        assert!(w.newer_than("a", Some("10")).is_none());
        assert!(!w.is_stale("a", Some("11")));
        assert!(!w.is_stale("a", Some("not-a-number")));
        assert!(!w.is_stale("b", Some("1")));
        w.forget(&"a".to_owned());
        assert!(!w.is_stale("a", Some("9")));
    }

    #[test]
    fn only_our_own_write_is_a_quiet_echo() {
        let w = Written::default();
        w.record("a", written_at("10"));
        assert!(!w.is_quiet_echo("a", Some("9")), "an older version");
        assert!(w.newer_than("a", Some("9")).is_some());
        assert!(w.is_quiet_echo("a", Some("10")));
        assert!(
            w.newer_than("a", Some("9")).is_none(),
            "the cache caught up: copy dropped"
        );
        assert!(!w.is_quiet_echo("a", Some("11")), "someone else's change");
        assert!(!w.is_quiet_echo("b", Some("10")), "no write of ours");
        w.record("a", written_at("12"));
        assert!(w.is_quiet_echo("a", Some("10")), "our write before, coming late");
        assert!(!w.is_quiet_echo("a", Some("11")));
        assert!(w.is_quiet_echo("a", Some("12")));
    }
}
