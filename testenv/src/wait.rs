//! Polling waits with a deadline, for tests and start-up.
use std::future::Future;
use std::time::{Duration, Instant};

use crate::{Error, Result};

/// How long test waits default to; `KFOP_TEST_TIMEOUT_SECS` overrides (slow machines, real clusters).
pub fn default_timeout() -> Duration {
    std::env::var("KFOP_TEST_TIMEOUT_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(Duration::from_secs(60), Duration::from_secs)
}

/// Calls `probe` every 100 ms until it yields `Some`, an error, or `timeout` passes.
pub async fn until<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await? {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: what.to_owned(),
                seconds: timeout.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn returns_the_first_value() {
        let mut n = 0;
        let got = until("n to reach 3", Duration::from_secs(5), || {
            n += 1;
            let v = n;
            async move { Ok((v >= 3).then_some(v)) }
        })
        .await
        .unwrap();
        assert_eq!(got, 3);
    }

    #[tokio::test]
    async fn times_out_naming_what_it_waited_for() {
        let err = until::<(), _, _>("never", Duration::from_millis(150), || async { Ok(None) })
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "timed out after 0s waiting for never");
    }
}
