//! State this process keeps per job (what it wrote, what it deleted, when it last acted), behind
//! one lock per kind of state, and dropped when the job goes so a long-running operator does not
//! grow with every job it has ever seen.
use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard};

#[derive(Debug)]
pub struct PerJob<K, V> {
    by_job: Mutex<HashMap<K, V>>,
}

impl<K, V> Default for PerJob<K, V> {
    fn default() -> Self {
        Self {
            by_job: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash, V> PerJob<K, V> {
    /// The map, or none if a panicking holder poisoned it (the state is advisory: callers then
    /// act as if nothing were remembered).
    pub fn lock(&self) -> Option<MutexGuard<'_, HashMap<K, V>>> {
        self.by_job.lock().ok()
    }

    /// Forgets one job.
    pub fn forget(&self, job: &K) {
        if let Some(mut by_job) = self.lock() {
            by_job.remove(job);
        }
    }

    /// Forgets every job not in `live`.
    pub fn retain(&self, live: &HashSet<K>) {
        if let Some(mut by_job) = self.lock() {
            by_job.retain(|job, _| live.contains(job));
        }
    }

    /// How many jobs are remembered.
    pub fn len(&self) -> usize {
        self.lock().map_or(0, |by_job| by_job.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::PerJob;

    #[test]
    fn forgets_gone_jobs() {
        let state: PerJob<String, u8> = PerJob::default();
        for job in ["a", "b", "c"] {
            state.lock().unwrap().insert(job.to_owned(), 1);
        }
        state.forget(&"a".to_owned());
        state.retain(&["b".to_owned()].into());
        assert_eq!(state.len(), 1);
        assert!(state.lock().unwrap().contains_key("b"));
        state.retain(&[].into());
        assert!(state.is_empty());
    }
}
