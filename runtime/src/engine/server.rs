//! The operator's HTTP endpoint: `/metrics` for Prometheus and `/healthz` and `/readyz` for the
//! kubelet's probes.
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::metrics::Metrics;

/// The content type of [`Metrics::encode`]'s output.
const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Why [`serve`] stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The listener's address could not be read, so nothing was served.
    #[error("could not read the HTTP listener's address: {0}")]
    LocalAddr(#[source] std::io::Error),
    /// Serving failed after start-up.
    #[error("HTTP server on {addr} failed: {source}")]
    Serve {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

#[derive(Clone)]
struct AppState {
    metrics: Arc<Metrics>,
    ready: watch::Receiver<bool>,
}

/// Serves [`router`] on `listener` until `shutdown` completes, then finishes in-flight requests.
///
/// It takes a bound listener so that the caller reports a bad address before the operator starts
/// and tests can bind port 0.
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    ready: watch::Receiver<bool>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let addr = listener.local_addr().map_err(ServerError::LocalAddr)?;
    tracing::info!(%addr, "serving /metrics, /healthz and /readyz");
    axum::serve(listener, router(metrics, ready))
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|source| ServerError::Serve { addr, source })
}

/// The routes: `GET /metrics` (OpenMetrics text), `GET /healthz` (always `ok` while the process
/// serves) and `GET /readyz` (`ok`, or 503 `not ready` while `ready` holds `false`).
pub fn router(metrics: Arc<Metrics>, ready: watch::Receiver<bool>) -> Router {
    Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(AppState { metrics, ready })
}

async fn metrics_handler(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)],
        state.metrics.encode(),
    )
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<AppState>) -> (StatusCode, &'static str) {
    // Copy the flag out so the watch lock is not held while the response is built.
    let ready = *state.ready.borrow();
    if ready {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;

    async fn get(app: &Router, path: &str) -> (StatusCode, Option<String>, String) {
        let request = Request::get(path).body(Body::empty()).unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|value| value.to_str().unwrap().to_owned());
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, content_type, String::from_utf8(body.to_vec()).unwrap())
    }

    fn app(ready: bool) -> (Router, Arc<Metrics>, watch::Sender<bool>) {
        let metrics = Arc::new(Metrics::new());
        let (tx, rx) = watch::channel(ready);
        (router(metrics.clone(), rx), metrics, tx)
    }

    #[tokio::test]
    async fn metrics_serves_openmetrics_text() {
        let (app, metrics, _tx) = app(true);
        metrics.job_created("ns", "pytorch");

        let (status, content_type, body) = get(&app, "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            content_type.as_deref(),
            Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
        );
        assert!(
            body.lines().any(|line| line
                == r#"training_operator_jobs_created_total{job_namespace="ns",framework="pytorch"} 1"#),
            "{body}"
        );
        assert!(body.ends_with("# EOF\n"), "{body}");
        assert_eq!(body, metrics.encode());
    }

    #[tokio::test]
    async fn healthz_is_ok_even_when_not_ready() {
        let (app, _metrics, _tx) = app(false);
        let (status, _, body) = get(&app, "/healthz").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ok"));
    }

    #[tokio::test]
    async fn readyz_follows_the_watch() {
        let (app, _metrics, tx) = app(false);
        let (status, _, body) = get(&app, "/readyz").await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, "not ready")
        );

        tx.send(true).unwrap();
        let (status, _, body) = get(&app, "/readyz").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ok"));

        tx.send(false).unwrap();
        let (status, _, _) = get(&app, "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    }

    #[tokio::test]
    async fn unknown_paths_and_methods_are_rejected() {
        let (app, _metrics, _tx) = app(true);
        assert_eq!(get(&app, "/nope").await.0, StatusCode::NOT_FOUND);
        let request = Request::post("/metrics").body(Body::empty()).unwrap();
        let response = app.oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    }

    #[tokio::test]
    async fn serve_answers_over_tcp_and_stops_on_shutdown() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (_ready_tx, ready) = watch::channel(true);
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, Arc::new(Metrics::new()), ready, async {
            let _ = stop_rx.await;
        }));

        // A blocking std client keeps the test free of an HTTP client dependency.
        let response = tokio::task::spawn_blocking(move || {
            let mut stream = std::net::TcpStream::connect(addr).unwrap();
            stream
                .write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
                .unwrap();
            let mut response = String::new();
            stream.read_to_string(&mut response).unwrap();
            response
        })
        .await
        .unwrap();
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
        assert!(response.ends_with("\r\n\r\nok"), "{response}");

        stop_tx.send(()).unwrap();
        let result = tokio::time::timeout(std::time::Duration::from_secs(10), server)
            .await
            .unwrap()
            .unwrap();
        assert!(result.is_ok(), "{result:?}");
    }

    #[test]
    fn serve_error_names_the_address() {
        let error = ServerError::Serve {
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            source: std::io::Error::other("boom"),
        };
        assert_eq!(error.to_string(), "HTTP server on 127.0.0.1:8080 failed: boom");
    }
}
