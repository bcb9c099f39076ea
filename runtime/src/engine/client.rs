//! The operator's API client, with client-go's token-bucket QPS and burst limits (kube-rs has no
//! client-side limiter; Kubeflow is stuck at controller-runtime's 20/30, #2411), and counters of
//! every request it sends (see [`crate::metrics::client`]): when sent
//! (`kfop_client_request_attempts_total{verb,resource}`), when answered
//! (`kfop_client_requests_total{verb,resource,code}`), and what each 403 denied
//! (`kfop_client_forbidden_total{verb,group,resource,namespace}`).
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

use futures::FutureExt;
use futures::future::BoxFuture;
use kube::client::ClientBuilder;
use kube::{Client, Config};
use tower::{Layer, Service};

use crate::metrics::{self, ClientAttemptLabels, ClientForbiddenLabels, ClientMetrics, ClientRequestLabels};

/// Requests per second and burst; `qps <= 0` means unlimited.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    pub qps: f32,
    pub burst: u32,
}

impl Default for RateLimit {
    /// No client-side limit: a limiter in the client binds before the API server does (at
    /// 200 QPS it was kfop's bottleneck). The server protects itself with API Priority and
    /// Fairness, and kube's client retries its 429s after their `Retry-After` (tested in
    /// `tests/client.rs`). Set one to share a busy API server politely.
    fn default() -> Self {
        Self { qps: 0.0, burst: 400 }
    }
}

/// A client for `config` whose requests pass through the token bucket of `limit` and are counted
/// in [`crate::metrics::client`] (the count includes requests that waited for a token).
pub fn build(config: Config, limit: RateLimit) -> Result<Client, kube::Error> {
    let builder = ClientBuilder::try_from(config)?;
    let counter = CountLayer {
        metrics: metrics::client(),
    };
    if limit.qps <= 0.0 {
        return Ok(builder.with_layer(&counter).build());
    }
    Ok(builder
        .with_layer(&RateLimitLayer {
            bucket: Arc::new(Mutex::new(Bucket::new(limit, Instant::now()))),
            metrics: metrics::client(),
        })
        .with_layer(&counter)
        .build())
}

/// Counts each request when it is sent, and by verb, resource and response code when its response
/// (headers) arrives. Both, because a request the server never answers is seen only by the first.
#[derive(Debug, Clone, Copy)]
struct CountLayer {
    metrics: &'static ClientMetrics,
}

impl<S> Layer<S> for CountLayer {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Counted {
            inner,
            metrics: self.metrics,
        }
    }
}

#[derive(Debug, Clone)]
struct Counted<S> {
    inner: S,
    metrics: &'static ClientMetrics,
}

impl<S, B, RB> Service<http::Request<B>> for Counted<S>
where
    S: Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let target = classify(request.method(), request.uri());
        let metrics = self.metrics;
        metrics
            .attempts
            .get_or_create(&ClientAttemptLabels {
                verb: target.verb,
                resource: target.resource.clone(),
            })
            .inc();
        self.inner
            .call(request)
            .map(move |result| {
                let code = match &result {
                    Ok(response) => response.status().as_u16().to_string(),
                    Err(_) => "error".to_owned(),
                };
                if code == "403" {
                    metrics
                        .forbidden
                        .get_or_create(&ClientForbiddenLabels {
                            verb: target.verb,
                            group: target.group,
                            resource: target.resource.clone(),
                            namespace: target.namespace,
                        })
                        .inc();
                }
                metrics
                    .requests
                    .get_or_create(&ClientRequestLabels {
                        verb: target.verb,
                        resource: target.resource,
                        code,
                    })
                    .inc();
                result
            })
            .boxed()
    }
}

/// What a request asks of the API server, as an authorizer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    verb: &'static str,
    group: String,
    /// With its subresource: `pytorchjobs/status`.
    resource: String,
    namespace: String,
}

/// The Kubernetes verb, group, resource (`pods`, `pytorchjobs/status`) and namespace of a request,
/// as the API server's audit log names them; non-resource paths (`/version`) have resource `""`.
fn classify(method: &http::Method, uri: &http::Uri) -> Target {
    let segments: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
    let (group, rest): (&str, &[&str]) = match segments.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (group, rest),
        _ => ("", &[]),
    };
    // `namespaces/<ns>/<resource>/...` is namespaced; `namespaces/<ns>` is the namespace itself.
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (*ns, rest),
        other => ("", other),
    };
    let (resource, named) = match rest {
        [] => (String::new(), false),
        [resource] => ((*resource).to_owned(), false),
        [resource, _name] => ((*resource).to_owned(), true),
        [resource, _name, sub, ..] => (format!("{resource}/{sub}"), true),
    };
    let watch = uri
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
    let verb = match *method {
        http::Method::GET if watch => "watch",
        http::Method::GET if named || resource.is_empty() => "get",
        http::Method::GET => "list",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE if named => "delete",
        http::Method::DELETE => "deletecollection",
        _ => "other",
    };
    Target {
        verb,
        group: group.to_owned(),
        resource,
        namespace: namespace.to_owned(),
    }
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
    metrics: &'static ClientMetrics,
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimited {
            inner,
            bucket: self.bucket.clone(),
            metrics: self.metrics,
            wait: None,
            granted: false,
        }
    }
}

/// Readiness waits for a token; kube's client drives it through a buffer, one request at a time.
struct RateLimited<S> {
    inner: S,
    bucket: Arc<Mutex<Bucket>>,
    metrics: &'static ClientMetrics,
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
                Some(delay) => {
                    self.metrics.throttled_seconds.inc_by(delay.as_secs_f64());
                    self.wait = Some(Box::pin(tokio::time::sleep(delay)));
                }
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
            metrics: Box::leak(Box::default()),
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

    #[test]
    fn classifies_verbs_and_resources() {
        let cases = [
            ("GET", "/api/v1/namespaces/a/pods?labelSelector=x", "list", "pods"),
            (
                "GET",
                "/api/v1/pods?watch=true&resourceVersion=1",
                "watch",
                "pods",
            ),
            ("GET", "/api/v1/namespaces/a/pods/p-0", "get", "pods"),
            ("POST", "/api/v1/namespaces/a/services", "create", "services"),
            ("DELETE", "/api/v1/namespaces/a/pods/p-0", "delete", "pods"),
            (
                "PATCH",
                "/apis/kubeflow.org/v1/namespaces/a/pytorchjobs/j/status",
                "patch",
                "pytorchjobs/status",
            ),
            (
                "PUT",
                "/apis/coordination.k8s.io/v1/namespaces/k/leases/l",
                "update",
                "leases",
            ),
            (
                "POST",
                "/apis/events.k8s.io/v1/namespaces/a/events",
                "create",
                "events",
            ),
            ("GET", "/api/v1/namespaces/a", "get", "namespaces"),
            ("GET", "/version", "get", ""),
        ];
        for (method, uri, verb, resource) in cases {
            let method: http::Method = method.parse().unwrap();
            let uri: http::Uri = uri.parse().unwrap();
            let target = classify(&method, &uri);
            assert_eq!(
                (target.verb, target.resource),
                (verb, resource.to_owned()),
                "{uri}"
            );
        }
    }

    #[tokio::test]
    async fn counts_requests_by_verb_resource_and_code() {
        use tower::ServiceExt;
        let metrics: &'static ClientMetrics = Box::leak(Box::default());
        let mut svc = CountLayer { metrics }.layer(tower::service_fn(|req: http::Request<()>| async move {
            let status = if req.method() == http::Method::POST {
                409
            } else {
                200
            };
            Ok::<_, std::convert::Infallible>(http::Response::builder().status(status).body(()).unwrap())
        }));
        for method in ["POST", "POST", "GET"] {
            let request = http::Request::builder()
                .method(method)
                .uri("/api/v1/namespaces/a/pods")
                .body(())
                .unwrap();
            svc.ready().await.unwrap().call(request).await.unwrap();
        }
        let count = |verb, code: &str| {
            metrics
                .requests
                .get_or_create(&ClientRequestLabels {
                    verb,
                    resource: "pods".into(),
                    code: code.into(),
                })
                .get()
        };
        assert_eq!(count("create", "409"), 2);
        assert_eq!(count("list", "200"), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn throttled_time_is_counted() {
        use tower::ServiceExt;
        let metrics: &'static ClientMetrics = Box::leak(Box::default());
        let layer = RateLimitLayer {
            bucket: Arc::new(Mutex::new(Bucket::new(
                RateLimit { qps: 4.0, burst: 1 },
                Instant::now(),
            ))),
            metrics,
        };
        let mut svc = layer.layer(tower::service_fn(|n: u32| async move {
            Ok::<_, std::convert::Infallible>(n)
        }));
        for n in 0..3 {
            svc.ready().await.unwrap().call(n).await.unwrap();
        }
        let waited = metrics.throttled_seconds.get();
        assert!((waited - 0.5).abs() < 1e-3, "{waited}");
    }

    #[test]
    fn classifies_groups_and_namespaces() {
        let target = |uri: &str| classify(&http::Method::POST, &uri.parse().unwrap());
        let events = target("/apis/events.k8s.io/v1/namespaces/soak/events");
        assert_eq!(
            (events.group.as_str(), events.namespace.as_str()),
            ("events.k8s.io", "soak")
        );
        let pods = target("/api/v1/namespaces/a/pods");
        assert_eq!((pods.group.as_str(), pods.namespace.as_str()), ("", "a"));
        let namespace = target("/api/v1/namespaces/a");
        assert_eq!(
            (namespace.resource.as_str(), namespace.namespace.as_str()),
            ("namespaces", "")
        );
    }

    /// An operator retrying in a tight loop against a server that never answers (SIGSTOPped):
    /// every try shows as an attempt though none ever completes.
    #[tokio::test(start_paused = true)]
    async fn attempts_count_requests_no_answer_ever_comes_back_for() {
        use tower::ServiceExt;
        let metrics: &'static ClientMetrics = Box::leak(Box::default());
        let mut svc = CountLayer { metrics }.layer(tower::service_fn(|_: http::Request<()>| {
            futures::future::pending::<Result<http::Response<()>, std::convert::Infallible>>()
        }));
        for _ in 0..50 {
            let request = http::Request::builder()
                .uri("/api/v1/namespaces/a/pods/p-0")
                .body(())
                .unwrap();
            let call = svc.ready().await.unwrap().call(request);
            // Given up on after 10 ms, as a short client timeout would, and tried again.
            assert!(
                tokio::time::timeout(Duration::from_millis(10), call)
                    .await
                    .is_err()
            );
        }
        let attempts = metrics
            .attempts
            .get_or_create(&ClientAttemptLabels {
                verb: "get",
                resource: "pods".into(),
            })
            .get();
        assert_eq!(attempts, 50);
        let answered: u64 = ["200", "error"]
            .iter()
            .map(|code| {
                metrics
                    .requests
                    .get_or_create(&ClientRequestLabels {
                        verb: "get",
                        resource: "pods".into(),
                        code: (*code).into(),
                    })
                    .get()
            })
            .sum();
        assert_eq!(answered, 0, "nothing came back, so the old figure stays 0");
    }

    #[tokio::test]
    async fn forbidden_responses_name_what_was_denied() {
        use tower::ServiceExt;
        let metrics: &'static ClientMetrics = Box::leak(Box::default());
        let mut svc = CountLayer { metrics }.layer(tower::service_fn(|req: http::Request<()>| async move {
            let status = if req.uri().path().contains("events") {
                403
            } else {
                201
            };
            Ok::<_, std::convert::Infallible>(http::Response::builder().status(status).body(()).unwrap())
        }));
        for uri in [
            "/apis/events.k8s.io/v1/namespaces/soak/events",
            "/apis/events.k8s.io/v1/namespaces/soak/events",
            "/api/v1/namespaces/soak/pods",
        ] {
            let request = http::Request::builder().method("POST").uri(uri).body(()).unwrap();
            svc.ready().await.unwrap().call(request).await.unwrap();
        }
        let denied = metrics
            .forbidden
            .get_or_create(&ClientForbiddenLabels {
                verb: "create",
                group: "events.k8s.io".into(),
                resource: "events".into(),
                namespace: "soak".into(),
            })
            .get();
        assert_eq!(denied, 2);
        let pods = metrics
            .forbidden
            .get_or_create(&ClientForbiddenLabels {
                verb: "create",
                group: String::new(),
                resource: "pods".into(),
                namespace: "soak".into(),
            })
            .get();
        assert_eq!(pods, 0);
    }
}
