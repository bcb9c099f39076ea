//! The operator's own conversion webhook: an HTTPS listener (rustls) answering the API
//! server's ConversionReviews for kinds served in more than one version, with certificates the
//! operator makes and rotates itself (no cert-manager).
//!
//! Every replica serves it, leader or not, so a leader change never interrupts conversion. Each
//! replica, every [`Policy::check_every`]: reads the Secret (creating or rotating it as
//! [`rotation`] decides; optimistic concurrency lets one replica win), points each CRD's
//! `spec.conversion` at the webhook with the Secret's CA bundle (out of cluster, unless the CRD
//! names another replica's URL that still answers), and serves the Secret's current pair,
//! reloading it without dropping connections.
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum_server::tls_rustls::RustlsConfig;
use kube::Client;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

pub mod certs;
pub mod conversion;
pub mod rotation;
pub mod store;
pub mod unserved;

pub use conversion::{Converter, Converters};
pub use rotation::Policy;
pub use store::{CrdState, Endpoint, Store, StoreError};

use rotation::{Material, Pair};

/// Why the webhook stopped serving.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("the webhook's serving certificate or key is unusable: {0}")]
    Tls(String),
    #[error("conversion webhook on {addr}: {source}")]
    Serve {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the webhook listener's address could not be read: {0}")]
    LocalAddr(#[source] std::io::Error),
    #[error("binding the conversion webhook to {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(
        "the CRD {crd} converts between its versions through the webhook at {target}, which nothing \
         serves: out of cluster, pass --webhook-url=https://<host:port the API server reaches> (and \
         --webhook-bind-address to listen there), or install the CRD without conversion \
         (`kfop-operator crds --without-conversion`)"
    )]
    Unserved { crd: String, target: String },
}

/// Where the webhook listens, and how its certificates are kept.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    pub addr: SocketAddr,
    pub options: WebhookOptions,
}

/// How the webhook's certificates are kept.
#[derive(Debug, Clone)]
pub struct WebhookOptions {
    /// The Secret (in `namespace`) that holds the CA bundle and serving pair.
    pub namespace: String,
    pub secret_name: String,
    /// How the API server reaches this listener.
    pub endpoint: Endpoint,
    pub policy: Policy,
}

/// Binds `addr` (before anything starts, so a taken port is reported at once).
pub fn bind(addr: SocketAddr) -> Result<std::net::TcpListener, WebhookError> {
    let listener = std::net::TcpListener::bind(addr).map_err(|source| WebhookError::Bind { addr, source })?;
    listener
        .set_nonblocking(true)
        .map_err(|source| WebhookError::Bind { addr, source })?;
    Ok(listener)
}

/// Serves `converters` on `listener` until `shutdown` completes, keeping the certificate and
/// the CRDs in step. Failures to reach the API server are logged and retried; only a listener
/// that cannot serve ends it.
pub async fn serve(
    client: Client,
    options: WebhookOptions,
    converters: Converters,
    listener: std::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), WebhookError> {
    let addr = listener.local_addr().map_err(WebhookError::LocalAddr)?;
    let store = Store::new(
        client,
        &options.namespace,
        &options.secret_name,
        options.endpoint.clone(),
        options.policy,
    );
    let crds: Vec<String> = converters.iter().map(|c| c.crd().to_owned()).collect();
    let every = options.policy.check_every();
    tokio::pin!(shutdown);

    // The first certificate: nothing can be served before it.
    let mut material = loop {
        match keep_in_step(&store, &crds).await {
            Ok(m) => break m,
            Err(e) => tracing::warn!(error = %e, "conversion webhook: no certificate yet; retrying"),
        }
        tokio::select! {
            () = &mut shutdown => return Ok(()),
            () = tokio::time::sleep(every.min(Duration::from_secs(2))) => {}
        }
    };
    let tls = RustlsConfig::from_config(server_config(&material.serving)?);
    let handle = axum_server::Handle::new();
    let server = axum_server::from_tcp_rustls(listener, tls.clone())
        .map_err(|source| WebhookError::Serve { addr, source })?
        .handle(handle.clone())
        .serve(conversion::router(converters).into_make_service());
    let mut server = tokio::spawn(server);
    tracing::info!(%addr, crds = ?crds, "serving the conversion webhook");

    loop {
        tokio::select! {
            () = &mut shutdown => {
                handle.graceful_shutdown(Some(Duration::from_secs(5)));
                return match (&mut server).await {
                    Ok(result) => result.map_err(|source| WebhookError::Serve { addr, source }),
                    Err(join) => Err(WebhookError::Serve { addr, source: std::io::Error::other(join) }),
                };
            }
            result = &mut server => {
                let source = match result {
                    Ok(Ok(())) => std::io::Error::other("stopped"),
                    Ok(Err(e)) => e,
                    Err(join) => std::io::Error::other(join),
                };
                return Err(WebhookError::Serve { addr, source });
            }
            () = tokio::time::sleep(every) => {}
        }
        match keep_in_step(&store, &crds).await {
            Ok(next) if next.serving != material.serving => match server_config(&next.serving) {
                Ok(config) => {
                    tls.reload_from_config(config);
                    tracing::info!("conversion webhook now serves the rotated certificate");
                    material = next;
                }
                Err(e) => tracing::warn!(error = %e, "conversion webhook: keeping the old certificate"),
            },
            Ok(next) => material = next,
            Err(e) => tracing::warn!(error = %e, "conversion webhook: certificate check failed; retrying"),
        }
    }
}

/// One pass: the Secret (created or rotated if due) and every CRD pointed at the webhook with
/// its bundle.
async fn keep_in_step(store: &Store, crds: &[String]) -> Result<Material, StoreError> {
    let mut states = Vec::with_capacity(crds.len());
    for crd in crds {
        states.push(store.crd_state(crd, conversion::PATH).await?);
    }
    // A staged pair is promoted only once every CRD trusts its CA.
    let trusted = match states.split_first() {
        Some((first, rest)) if rest.iter().all(|s| s.bundle == first.bundle) => first.bundle.clone(),
        _ => None,
    };
    let material = store.sync_secret(trusted.as_deref()).await?;
    for (crd, state) in crds.iter().zip(&states) {
        let trusted = state.bundle.as_deref() == Some(material.ca_bundle.as_str());
        // Out of cluster each replica has its own URL: one that answers keeps the CRD, since
        // every repoint closes every watch of the kind. A dead one is replaced.
        if let Some(url) = state.other_url.as_deref().filter(|_| trusted)
            && answers(url).await
        {
            continue;
        }
        if !state.points_here || !trusted {
            store
                .point_crd(crd, conversion::PATH, &material.ca_bundle)
                .await?;
        }
    }
    Ok(material)
}

/// Whether something listens at `url`'s address (a replica's webhook, out of cluster).
async fn answers(url: &str) -> bool {
    let address = store::socket_address(url);
    let connect = tokio::net::TcpStream::connect(address);
    matches!(
        tokio::time::timeout(Duration::from_secs(2), connect).await,
        Ok(Ok(_))
    )
}

/// rustls' server configuration for `pair`, with ring as the provider (kube's).
fn server_config(pair: &Pair) -> Result<Arc<rustls::ServerConfig>, WebhookError> {
    let chain = CertificateDer::pem_slice_iter(pair.cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| WebhookError::Tls(e.to_string()))?;
    let key =
        PrivateKeyDer::from_pem_slice(pair.key.as_bytes()).map_err(|e| WebhookError::Tls(e.to_string()))?;
    let mut config =
        rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| WebhookError::Tls(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| WebhookError::Tls(e.to_string()))?;
    // No session resumption: the API server keeps its connection to a webhook open, so a
    // resumption cache (256 sessions, 30 kB allocated up front) would only hold memory.
    config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    config.send_tls13_tickets = 0;
    Ok(Arc::new(config))
}
