//! Requests retried through faults: an API server restarting or frozen answers errors for a while.
use std::time::{Duration, Instant};

/// `call` until it succeeds, pausing `pause` after each failure; the last error once `deadline`
/// has passed.
pub async fn until<T, E, Fut>(
    deadline: Instant,
    pause: Duration,
    mut call: impl FnMut() -> Fut,
) -> Result<T, E>
where
    Fut: Future<Output = Result<T, E>>,
{
    loop {
        match call().await {
            Ok(value) => return Ok(value),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => tokio::time::sleep(pause).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn retries_until_success_or_the_deadline() {
        let mut tries = 0;
        let ok: Result<u32, &str> = until(Instant::now() + Duration::from_secs(5), Duration::ZERO, || {
            tries += 1;
            let result = if tries < 3 { Err("not yet") } else { Ok(tries) };
            async move { result }
        })
        .await;
        assert_eq!(ok, Ok(3));
        let failed: Result<(), &str> = until(Instant::now(), Duration::ZERO, || async { Err("down") }).await;
        assert_eq!(failed, Err("down"));
    }
}
