//! Percentiles and throughput over per-job milestones (seconds since the phase started).
use serde::{Deserialize, Serialize};

/// p50/p90/p99 and max of a latency sample, in seconds; `count` is how many jobs reached it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub count: usize,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles; `None` for an empty sample. NaNs are ignored.
    pub fn of(samples: &[f64]) -> Option<Self> {
        let mut sorted: Vec<f64> = samples.iter().copied().filter(|v| !v.is_nan()).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        let max = *sorted.last()?;
        Some(Self {
            count: sorted.len(),
            p50: nearest_rank(&sorted, 50.0)?,
            p90: nearest_rank(&sorted, 90.0)?,
            p99: nearest_rank(&sorted, 99.0)?,
            max,
        })
    }
}

/// The smallest value with at least `p` percent of the sorted sample at or below it.
fn nearest_rank(sorted: &[f64], p: f64) -> Option<f64> {
    // ceil(p/100 * n) as a 1-based rank; float-to-int casts saturate, the clamp keeps it in range.
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

/// Jobs per second: `count` jobs that all reached a milestone, the last of them at `last` seconds
/// after `first` (the first submission). `None` when nothing or no time passed.
pub fn throughput(count: usize, first: f64, last: f64) -> Option<f64> {
    let span = last - first;
    #[allow(clippy::cast_precision_loss)]
    (count > 0 && span > 0.0).then(|| count as f64 / span)
}

/// Per-job latencies `milestone - start` for the jobs that have both.
pub fn latencies(pairs: impl IntoIterator<Item = (f64, Option<f64>)>) -> Vec<f64> {
    pairs
        .into_iter()
        .filter_map(|(start, end)| end.map(|end| end - start))
        .collect()
}

/// The latest milestone, if every job reached it.
pub fn all_reached(milestones: &[Option<f64>]) -> Option<f64> {
    milestones
        .iter()
        .try_fold(f64::NEG_INFINITY, |latest, m| m.map(|m| latest.max(m)))
        .filter(|latest| latest.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<f64> = (1..=100).map(f64::from).collect();
        let p = Percentiles::of(&samples).unwrap();
        assert_eq!(
            (p.count, p.p50, p.p90, p.p99, p.max),
            (100, 50.0, 90.0, 99.0, 100.0)
        );

        // Order does not matter; a small sample's p99 is its maximum.
        let p = Percentiles::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((p.p50, p.p90, p.p99, p.max), (2.0, 3.0, 3.0, 3.0));

        let p = Percentiles::of(&[0.7]).unwrap();
        assert_eq!((p.p50, p.p99), (0.7, 0.7));
        assert_eq!(Percentiles::of(&[]), None);
        assert_eq!(Percentiles::of(&[f64::NAN]), None);
    }

    #[test]
    fn throughput_is_jobs_over_span() {
        assert_eq!(throughput(100, 0.0, 4.0), Some(25.0));
        assert_eq!(throughput(10, 2.0, 4.0), Some(5.0));
        assert_eq!(throughput(0, 0.0, 4.0), None);
        assert_eq!(throughput(5, 3.0, 3.0), None);
    }

    #[test]
    fn latencies_skip_unreached_milestones() {
        let l = latencies([(1.0, Some(1.5)), (2.0, None), (3.0, Some(5.0))]);
        assert_eq!(l, vec![0.5, 2.0]);
    }

    #[test]
    fn all_reached_needs_every_job() {
        assert_eq!(all_reached(&[Some(1.0), Some(3.0), Some(2.0)]), Some(3.0));
        assert_eq!(all_reached(&[Some(1.0), None]), None);
        assert_eq!(all_reached(&[]), None);
    }
}
