//! The operator's API client, with client-go's token-bucket QPS and burst limits (kube-rs has no
//! client-side limiter; Kubeflow is stuck at controller-runtime's 20/30, #2411).
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

use kube::client::ClientBuilder;
use kube::{Client, Config};
use tower::{Layer, Service};

/// Requests per second and burst; `qps <= 0` means unlimited.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    pub qps: f32,
    pub burst: u32,
}

impl Default for RateLimit {
    /// Generous enough for thousands of jobs; lower it to protect a busy shared API server.
    fn default() -> Self {
        Self {
            qps: 200.0,
            burst: 400,
        }
    }
}

/// A client for `config` whose requests pass through the token bucket of `limit`.
pub fn build(config: Config, limit: RateLimit) -> Result<Client, kube::Error> {
    let builder = ClientBuilder::try_from(config)?;
    if limit.qps <= 0.0 {
        return Ok(builder.build());
    }
    Ok(builder
        .with_layer(&RateLimitLayer {
            bucket: Arc::new(Mutex::new(Bucket::new(limit, Instant::now()))),
        })
        .build())
}

/// Token bucket: `burst` tokens, refilled at `qps` per second.
#[derive(Debug)]
struct Bucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    fn new(limit: RateLimit, now: Instant) -> Self {
        let burst = f64::from(limit.burst.max(1));
        Self {
            qps: f64::from(limit.qps),
            burst,
            tokens: burst,
            last: now,
        }
    }

    /// Takes a token (`None`) or says how long until one is available.
    fn take(&mut self, now: Instant) -> Option<Duration> {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            None
        } else {
            Some(Duration::from_secs_f64((1.0 - self.tokens) / self.qps))
        }
    }
}

#[derive(Debug, Clone)]
struct RateLimitLayer {
    bucket: Arc<Mutex<Bucket>>,
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimited {
            inner,
            bucket: self.bucket.clone(),
            wait: None,
            granted: false,
        }
    }
}

/// Readiness waits for a token; kube's client drives it through a buffer, one request at a time.
struct RateLimited<S> {
    inner: S,
    bucket: Arc<Mutex<Bucket>>,
    wait: Option<Pin<Box<tokio::time::Sleep>>>,
    granted: bool,
}

impl<S, R> Service<R> for RateLimited<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        while !self.granted {
            if let Some(wait) = self.wait.as_mut() {
                if wait.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.wait = None;
            }
            let delay = match self.bucket.lock() {
                Ok(mut bucket) => bucket.take(Instant::now()),
                // A poisoned lock only means another request panicked mid-update: don't throttle.
                Err(_) => None,
            };
            match delay {
                None => self.granted = true,
                Some(delay) => self.wait = Some(Box::pin(tokio::time::sleep(delay))),
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.granted = false;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_qps() {
        let start = Instant::now();
        let mut bucket = Bucket::new(RateLimit { qps: 10.0, burst: 3 }, start);
        for _ in 0..3 {
            assert_eq!(bucket.take(start), None);
        }
        let wait = bucket.take(start).unwrap();
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-6, "{wait:?}");
        assert_eq!(bucket.take(start + Duration::from_millis(100)), None);
        assert!(bucket.take(start + Duration::from_millis(100)).is_some());
        // Idle time refills only up to the burst.
        let later = start + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(bucket.take(later), None);
        }
        assert!(bucket.take(later).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn service_waits_for_tokens() {
        use tower::ServiceExt;
        let layer = RateLimitLayer {
            bucket: Arc::new(Mutex::new(Bucket::new(
                RateLimit { qps: 2.0, burst: 1 },
                Instant::now(),
            ))),
        };
        let mut svc = layer.layer(tower::service_fn(|n: u32| async move {
            Ok::<_, std::convert::Infallible>(n)
        }));
        let t0 = tokio::time::Instant::now();
        for n in 0..3 {
            assert_eq!(svc.ready().await.unwrap().call(n).await.unwrap(), n);
        }
        // One token at once, then one per 500 ms.
        assert!(t0.elapsed() >= Duration::from_millis(999), "{:?}", t0.elapsed());
    }
}
