//! Protobuf on the wire for the built-in kinds kfop creates in bulk: pods, services and events,
//! and for the watches of child pods and services ([`watch`]).
//!
//! The API server decodes and encodes protobuf far more cheaply than JSON for built-in kinds
//! (Kubernetes' own controllers use it); custom resources have no protobuf form and stay JSON.
//! A create sends `k8s\0` + `runtime.Unknown{typeMeta, raw}` (the envelope of the API server's
//! protobuf serializer) and asks for the same back. An object holding a field the conversion
//! does not cover ([`convert`]) is sent as JSON instead, so nothing is dropped on the way.
//!
//! The encoding is a setting of the process, like its client: [`set_encoding`] once at start
//! (`--wire-encoding`), read by every create and when the child watches start.
use std::sync::atomic::{AtomicU8, Ordering};

use kube::api::{Api, PostParams};
use kube::core::Status;
use prost::Message;
use serde::Serialize;
use serde::de::DeserializeOwned;

pub mod convert;
pub mod watch;

pub use convert::Wire;

/// How kfop encodes the requests it sends for built-in kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Encoding {
    /// JSON, as for every kind.
    #[default]
    Json,
    /// Protobuf for pod, service and event creates (their answers too) and the child pod and
    /// service watches; JSON for the rest.
    Protobuf,
}

static ENCODING: AtomicU8 = AtomicU8::new(0);

/// Sets the encoding of this process's creates from now on.
pub fn set_encoding(encoding: Encoding) {
    ENCODING.store(encoding as u8, Ordering::Relaxed);
}

/// The encoding this process's creates use.
pub fn encoding() -> Encoding {
    match ENCODING.load(Ordering::Relaxed) {
        0 => Encoding::Json,
        _ => Encoding::Protobuf,
    }
}

/// The API server's protobuf media type.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// The first bytes of every protobuf body: `k8s` and encoding style 0 (`runtime.Unknown`).
const MAGIC: [u8; 4] = *b"k8s\0";

/// A protobuf body that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("protobuf body does not start with the k8s\\0 magic")]
    Magic,
    #[error("protobuf body of kind {found:?}, expected {expected}")]
    Kind {
        found: Option<String>,
        expected: &'static str,
    },
    #[error("decoding a protobuf body")]
    Decode(#[from] prost::DecodeError),
    #[error("protobuf watch ended inside a frame")]
    Truncated,
    #[error("protobuf watch event of unknown type {0:?}")]
    EventType(String),
}

/// `message` in the API server's envelope.
pub fn envelope<M: Message + k8s_pb::Resource>(message: &M) -> Vec<u8> {
    wrap(message, M::API_VERSION, M::KIND)
}

fn wrap(message: &impl Message, api_version: &str, kind: &str) -> Vec<u8> {
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown {
        type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
            api_version: Some(api_version.to_owned()),
            kind: Some(kind.to_owned()),
        }),
        raw: Some(message.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut body = Vec::with_capacity(MAGIC.len() + unknown.encoded_len());
    body.extend_from_slice(&MAGIC);
    unknown.encode(&mut body).unwrap_or_default();
    body
}

/// The message of kind `M` in the envelope `body`.
pub fn open<M: Message + Default + k8s_pb::Resource>(body: &[u8]) -> Result<M, WireError> {
    open_kind(body, M::KIND)
}

fn open_kind<M: Message + Default>(body: &[u8], expected: &'static str) -> Result<M, WireError> {
    let unknown = body
        .strip_prefix(&MAGIC)
        .ok_or(WireError::Magic)
        .and_then(|rest| Ok(k8s_pb::apimachinery::pkg::runtime::Unknown::decode(rest)?))?;
    let kind = unknown.type_meta.and_then(|t| t.kind);
    if kind.as_deref() != Some(expected) {
        return Err(WireError::Kind {
            found: kind,
            expected,
        });
    }
    Ok(M::decode(unknown.raw.unwrap_or_default().as_slice())?)
}

/// Creates `object` through `api` in the process's encoding: the object the server stored (as
/// much of it as [`Wire::from_pb`] keeps), or `None` when it already existed (409).
#[tracing::instrument(skip_all, fields(kind = K::KIND))]
pub async fn create<K>(api: &Api<K>, object: &K) -> Result<Option<K>, kube::Error>
where
    K: Wire + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let pb = match encoding() {
        Encoding::Json => None,
        Encoding::Protobuf => object.to_pb(),
    };
    let result = match pb {
        Some(pb) => create_protobuf(api, &pb).await.map(K::from_pb),
        None => api.create(&PostParams::default(), object).await,
    };
    match result {
        Ok(created) => Ok(Some(created)),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(None),
        Err(e) => Err(e),
    }
}

/// Sends the create of `pb` in protobuf and reads the protobuf answer.
async fn create_protobuf<K: Wire + Clone>(api: &Api<K>, pb: &K::Pb) -> Result<K::Pb, kube::Error> {
    use http_body_util::BodyExt;

    let mut request = kube::core::Request::new(api.resource_url())
        .create(&PostParams::default(), envelope(pb))
        .map_err(kube::Error::BuildRequest)?;
    let headers = request.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(PROTOBUF),
    );
    headers.insert(http::header::ACCEPT, http::HeaderValue::from_static(PROTOBUF));
    let client = api.clone().into_client();
    let response = client.send(request.map(kube::client::Body::from)).await?;
    let (parts, body) = response.into_parts();
    let body = body.collect().await?.to_bytes();
    if parts.status.is_success() {
        return open::<K::Pb>(&body).map_err(|e| kube::Error::Service(Box::new(e)));
    }
    Err(kube::Error::Api(Box::new(status(parts.status, &body))))
}

/// The `Status` of a failed request, in protobuf or JSON (a proxy may answer in text).
fn status(code: http::StatusCode, body: &[u8]) -> Status {
    if let Ok(pb) = open_kind::<k8s_pb::apimachinery::pkg::apis::meta::v1::Status>(body, "Status") {
        let failure = Status::failure(
            pb.message.as_deref().unwrap_or_default(),
            pb.reason.as_deref().unwrap_or_default(),
        );
        let code = pb
            .code
            .and_then(|c| u16::try_from(c).ok())
            .unwrap_or(code.as_u16());
        return failure.with_code(code);
    }
    serde_json::from_slice::<Status>(body).unwrap_or_else(|_| {
        Status::failure(&String::from_utf8_lossy(body), "Failed to parse error data").with_code(code.as_u16())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_pb::api::core::v1::Pod;
    use k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    #[test]
    fn an_envelope_opens_to_its_message() {
        let pod = Pod {
            metadata: Some(ObjectMeta {
                name: Some("p".into()),
                ..ObjectMeta::default()
            }),
            ..Pod::default()
        };
        let body = envelope(&pod);
        assert_eq!(&body[..4], b"k8s\0");
        assert_eq!(open::<Pod>(&body).unwrap(), pod);
        assert!(matches!(open::<Pod>(&body[1..]), Err(WireError::Magic)));
        assert!(matches!(
            open::<k8s_pb::api::core::v1::Service>(&body),
            Err(WireError::Kind { found: Some(k), .. }) if k == "Pod"
        ));
    }

    #[test]
    fn failures_read_in_either_encoding() {
        let pb = k8s_pb::apimachinery::pkg::apis::meta::v1::Status {
            status: Some("Failure".into()),
            message: Some("pods \"p\" already exists".into()),
            reason: Some("AlreadyExists".into()),
            code: Some(409),
            ..Default::default()
        };
        let read = status(http::StatusCode::CONFLICT, &wrap(&pb, "v1", "Status"));
        assert_eq!((read.code, read.reason.as_str()), (409, "AlreadyExists"));
        assert_eq!(read.message, "pods \"p\" already exists");
        let json = br#"{"kind":"Status","code":403,"reason":"Forbidden","message":"no"}"#;
        assert_eq!(status(http::StatusCode::FORBIDDEN, json).reason, "Forbidden");
        let text = status(http::StatusCode::BAD_GATEWAY, b"bad gateway");
        assert_eq!((text.code, text.message.as_str()), (502, "bad gateway"));
    }

    #[test]
    fn the_switch_is_json_until_set() {
        assert_eq!(Encoding::default(), Encoding::Json);
        assert_eq!(encoding(), Encoding::Json);
    }
}
