//! The resourceVersion of the last status this process wrote per job, to recognise a job read
//! from a cache that has not caught up with our own write (acting on it could re-emit a
//! transition or undo one).

use super::per_job::PerJob;

/// By job UID.
pub type Written = PerJob<String, u64>;

impl PerJob<String, u64> {
    pub fn record(&self, job_uid: &str, resource_version: Option<&str>) {
        let Some(rv) = resource_version.and_then(|rv| rv.parse().ok()) else {
            return;
        };
        if let Some(mut by_job) = self.lock() {
            by_job.insert(job_uid.to_owned(), rv);
        }
    }

    /// Whether `resource_version` is older than our last write. resourceVersions are opaque in
    /// the API contract; the etcd-backed server makes them increasing integers, and anything
    /// unparsable is treated as fresh.
    pub fn is_stale(&self, job_uid: &str, resource_version: Option<&str>) -> bool {
        let Some(seen) = resource_version.and_then(|rv| rv.parse::<u64>().ok()) else {
            return false;
        };
        self.lock()
            .is_some_and(|by_job| by_job.get(job_uid).is_some_and(|written| seen < *written))
    }
}

#[cfg(test)]
mod tests {
    use super::Written;

    #[test]
    fn older_versions_are_stale() {
        let w = Written::default();
        assert!(!w.is_stale("a", Some("5")));
        w.record("a", Some("10"));
        assert!(w.is_stale("a", Some("9")));
        assert!(!w.is_stale("a", Some("10")));
        assert!(!w.is_stale("a", Some("11")));
        assert!(!w.is_stale("a", Some("not-a-number")));
        assert!(!w.is_stale("b", Some("1")));
        w.forget(&"a".to_owned());
        assert!(!w.is_stale("a", Some("9")));
    }
}
