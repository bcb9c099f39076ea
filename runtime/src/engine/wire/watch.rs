//! List and watch in protobuf: child pods and services reach the caches as the API server's other
//! watchers (scheduler, controller-manager) get them, so its watch cache serializes each event
//! once for all of them instead of once more in JSON, and the operator decodes no JSON per event.
//!
//! [`watcher`] is a drop-in for [`kube::runtime::watcher()`] with the same states and recovery:
//! a paginated list (`Init`, `InitApply`, `InitDone`), a watch from the list's resourceVersion
//! with bookmarks, a relist on 410 Gone (an `ERROR` event or the HTTP status) and a re-watch from
//! the last resourceVersion when the stream ends or stays idle past its timeout.
//!
//! A protobuf watch body is a sequence of frames: a 4-byte big-endian length, then a
//! `meta.v1.WatchEvent` without envelope (the API server's raw stream serializer), whose
//! `object.raw` is the object in the usual `k8s\0` envelope (an `ERROR` event's a `Status`).
use std::collections::VecDeque;
use std::fmt::Debug;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use k8s_pb::api::core::v1 as pb;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb_meta;
use kube::api::{ListParams, VersionMatch, WatchParams};
use kube::core::Status;
use kube::runtime::watcher::{self, Event, InitialListStrategy, ListSemantic};
use kube::{Api, Resource, ResourceExt};
use prost::Message;
use prost::bytes::{Buf, BytesMut};
use serde::de::DeserializeOwned;

use super::{Encoding, WireError, open_kind, status};
use crate::child_view::{ObservedPod, ObservedService};

/// A kind watched in protobuf: what to ask for, and how its messages become the cached type.
pub trait Watched:
    Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static
{
    /// The `Accept` of a list.
    const LIST_ACCEPT: &'static str;
    /// The `Accept` of a watch.
    const WATCH_ACCEPT: &'static str;
    /// The list message and its kind in the envelope.
    type List: Message + Default;
    const LIST_KIND: &'static str;
    /// The item message and its kind in the envelope.
    type Item: Message + Default;
    const ITEM_KIND: &'static str;

    /// The list's metadata and its items.
    fn split(list: Self::List) -> (Option<pb_meta::ListMeta>, Vec<Self::Item>);
    fn from_item(item: Self::Item) -> Self;
}

impl Watched for ObservedPod {
    const LIST_ACCEPT: &'static str = super::PROTOBUF;
    const WATCH_ACCEPT: &'static str = super::PROTOBUF;
    type List = pb::PodList;
    const LIST_KIND: &'static str = "PodList";
    type Item = pb::Pod;
    const ITEM_KIND: &'static str = "Pod";

    fn split(list: pb::PodList) -> (Option<pb_meta::ListMeta>, Vec<pb::Pod>) {
        (list.metadata, list.items)
    }
    fn from_item(pod: pb::Pod) -> Self {
        super::convert::observed_pod(pod)
    }
}

/// Metadata only, as the JSON service watch asks for it.
impl Watched for ObservedService {
    const LIST_ACCEPT: &'static str =
        "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
    const WATCH_ACCEPT: &'static str =
        "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
    type List = pb_meta::PartialObjectMetadataList;
    const LIST_KIND: &'static str = "PartialObjectMetadataList";
    type Item = pb_meta::PartialObjectMetadata;
    const ITEM_KIND: &'static str = "PartialObjectMetadata";

    fn split(list: Self::List) -> (Option<pb_meta::ListMeta>, Vec<Self::Item>) {
        (list.metadata, list.items)
    }
    fn from_item(item: Self::Item) -> Self {
        super::convert::observed_service(item)
    }
}

/// The watch stream of `api` in the process's encoding: kube's watcher for JSON, this module's
/// for protobuf (which lists page by page; a config asking for streaming lists stays on JSON).
pub fn watcher<K: Watched>(
    api: Api<K>,
    config: watcher::Config,
) -> BoxStream<'static, watcher::Result<Event<K>>> {
    let streaming = matches!(config.initial_list_strategy, InitialListStrategy::StreamingList);
    if super::encoding() == Encoding::Json || streaming {
        return kube::runtime::watcher(api, config).boxed();
    }
    protobuf_watcher(api, config).boxed()
}

/// [`watcher`] in protobuf, whatever the process's encoding.
pub fn protobuf_watcher<K: Watched>(
    api: Api<K>,
    config: watcher::Config,
) -> impl Stream<Item = watcher::Result<Event<K>>> + Send {
    futures::stream::unfold((api, config, State::Empty), |(api, config, state)| async {
        let (event, state) = step(&api, &config, state).await;
        Some((event, (api, config, state)))
    })
}

/// The states of kube's watcher (without its streaming-list states).
enum State<K> {
    Empty,
    InitPage {
        continue_token: Option<String>,
        objects: VecDeque<K>,
        resource_version: Option<String>,
    },
    InitListed {
        resource_version: String,
    },
    Watching {
        resource_version: String,
        stream: BoxStream<'static, kube::Result<Change<K>>>,
    },
}

/// One decoded watch event.
#[derive(Debug, PartialEq)]
enum Change<K> {
    Added(K),
    Modified(K),
    Deleted(K),
    Bookmark(K),
    Error(Box<Status>),
}

async fn step<K: Watched>(
    api: &Api<K>,
    config: &watcher::Config,
    mut state: State<K>,
) -> (watcher::Result<Event<K>>, State<K>) {
    loop {
        match step_trampolined(api, config, state).await {
            (Some(result), next) => return (result, next),
            (None, next) => state = next,
        }
    }
}

/// One transition; `None` for a transition that yields no event.
async fn step_trampolined<K: Watched>(
    api: &Api<K>,
    config: &watcher::Config,
    state: State<K>,
) -> (Option<watcher::Result<Event<K>>>, State<K>) {
    match state {
        State::Empty => (
            Some(Ok(Event::Init)),
            State::InitPage {
                continue_token: None,
                objects: VecDeque::new(),
                resource_version: None,
            },
        ),
        State::InitPage {
            continue_token,
            mut objects,
            resource_version,
        } => {
            if let Some(next) = objects.pop_front() {
                let state = State::InitPage {
                    continue_token,
                    objects,
                    resource_version,
                };
                return (Some(Ok(Event::InitApply(next))), state);
            }
            if continue_token.is_none()
                && let Some(resource_version) = resource_version
            {
                return (Some(Ok(Event::InitDone)), State::InitListed { resource_version });
            }
            match list(api, config, continue_token).await {
                Ok((meta, items)) => {
                    let meta = meta.unwrap_or_default();
                    let resource_version = meta.resource_version.filter(|s| !s.is_empty());
                    let continue_token = meta.r#continue.filter(|s| !s.is_empty());
                    if resource_version.is_none() && continue_token.is_none() {
                        return (Some(Err(watcher::Error::NoResourceVersion)), State::Empty);
                    }
                    let objects = items.into_iter().map(K::from_item).collect();
                    let state = State::InitPage {
                        continue_token,
                        objects,
                        resource_version,
                    };
                    (None, state)
                }
                Err(e) => {
                    tracing::debug!(error = %e, "protobuf list failed");
                    (Some(Err(watcher::Error::InitialListFailed(e))), State::Empty)
                }
            }
        }
        State::InitListed { resource_version } => match watch(api, config, &resource_version).await {
            Ok(stream) => (
                None,
                State::Watching {
                    resource_version,
                    stream,
                },
            ),
            // The watch cache answers a resourceVersion it no longer holds with 410 too.
            Err(kube::Error::Api(e)) if e.code == 410 => (
                Some(Err(watcher::Error::WatchStartFailed(kube::Error::Api(e)))),
                State::Empty,
            ),
            Err(e) => {
                tracing::debug!(error = %e, "protobuf watch failed to start");
                (
                    Some(Err(watcher::Error::WatchStartFailed(e))),
                    State::InitListed { resource_version },
                )
            }
        },
        State::Watching {
            resource_version,
            mut stream,
        } => {
            let change = next_within(&mut stream, config.timeout).await;
            watched(change, resource_version, stream)
        }
    }
}

/// The transition of a watch on its next change (`None`: the stream ended or went quiet).
fn watched<K: Watched>(
    change: Option<kube::Result<Change<K>>>,
    resource_version: String,
    stream: BoxStream<'static, kube::Result<Change<K>>>,
) -> (Option<watcher::Result<Event<K>>>, State<K>) {
    match change {
        Some(Ok(Change::Added(o) | Change::Modified(o))) => changed(Event::Apply, o, stream),
        Some(Ok(Change::Deleted(o))) => changed(Event::Delete, o, stream),
        Some(Ok(Change::Bookmark(o))) => (
            None,
            State::Watching {
                resource_version: o.resource_version().unwrap_or(resource_version),
                stream,
            },
        ),
        Some(Ok(Change::Error(e))) => {
            tracing::debug!(code = e.code, reason = %e.reason, "protobuf watch error event");
            // 410 Gone: the server no longer holds our resourceVersion; start over.
            let next = if e.code == 410 {
                State::Empty
            } else {
                State::Watching {
                    resource_version,
                    stream,
                }
            };
            (Some(Err(watcher::Error::WatchError(e))), next)
        }
        Some(Err(e)) => {
            tracing::debug!(error = %e, "protobuf watch stream failed");
            (
                Some(Err(watcher::Error::WatchFailed(e))),
                State::Watching {
                    resource_version,
                    stream,
                },
            )
        }
        None => (None, State::InitListed { resource_version }),
    }
}

/// An object's change as `event`, the watch going on from its resourceVersion (an object
/// without one leaves nothing to resume from: start over).
fn changed<K: Watched>(
    event: fn(K) -> Event<K>,
    object: K,
    stream: BoxStream<'static, kube::Result<Change<K>>>,
) -> (Option<watcher::Result<Event<K>>>, State<K>) {
    match object.resource_version().filter(|rv| !rv.is_empty()) {
        Some(resource_version) => (
            Some(Ok(event(object))),
            State::Watching {
                resource_version,
                stream,
            },
        ),
        None => (Some(Err(watcher::Error::NoResourceVersion)), State::Empty),
    }
}

/// Beyond the server's own timeout (290 s unless set), a quiet watch is taken for a dead one.
const IDLE_MARGIN: Duration = Duration::from_secs(5);

async fn next_within<S: Stream + Unpin>(stream: &mut S, timeout: Option<u32>) -> Option<S::Item> {
    if timeout == Some(0) {
        return stream.next().await;
    }
    let idle = Duration::from_secs(u64::from(timeout.unwrap_or(290))) + IDLE_MARGIN;
    tokio::time::timeout(idle, stream.next()).await.ok().flatten()
}

fn list_params(config: &watcher::Config, continue_token: Option<String>) -> ListParams {
    let (resource_version, version_match) = match config.list_semantic {
        ListSemantic::Any => (Some("0".to_owned()), Some(VersionMatch::NotOlderThan)),
        ListSemantic::MostRecent => (None, None),
    };
    ListParams {
        label_selector: config.label_selector.clone(),
        field_selector: config.field_selector.clone(),
        limit: config.page_size,
        continue_token,
        version_match,
        resource_version,
        ..ListParams::default()
    }
}

fn watch_params(config: &watcher::Config) -> WatchParams {
    WatchParams {
        label_selector: config.label_selector.clone(),
        field_selector: config.field_selector.clone(),
        timeout: config.timeout,
        bookmarks: config.bookmarks,
        ..WatchParams::default()
    }
}

/// A failure to read a protobuf answer, as the client's error.
fn wire_error(e: WireError) -> kube::Error {
    kube::Error::Service(Box::new(e))
}

/// Sends `request` asking for `accept`; the response, or the server's `Status` as an error.
async fn send<K: Watched>(
    api: &Api<K>,
    request: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
    accept: &'static str,
) -> kube::Result<http::Response<kube::client::Body>> {
    use http_body_util::BodyExt;

    let mut request = request.map_err(kube::Error::BuildRequest)?;
    request
        .headers_mut()
        .insert(http::header::ACCEPT, http::HeaderValue::from_static(accept));
    let client = api.clone().into_client();
    let response = client.send(request.map(kube::client::Body::from)).await?;
    if response.status().is_success() {
        return Ok(response);
    }
    let (parts, body) = response.into_parts();
    let body = body.collect().await?.to_bytes();
    Err(kube::Error::Api(Box::new(status(parts.status, &body))))
}

/// One page of the list.
async fn list<K: Watched>(
    api: &Api<K>,
    config: &watcher::Config,
    continue_token: Option<String>,
) -> kube::Result<(Option<pb_meta::ListMeta>, Vec<K::Item>)> {
    use http_body_util::BodyExt;

    let request = kube::core::Request::new(api.resource_url()).list(&list_params(config, continue_token));
    let body = send(api, request, K::LIST_ACCEPT).await?.into_body();
    let body = body.collect().await?.to_bytes();
    let list = open_kind::<K::List>(&body, K::LIST_KIND).map_err(wire_error)?;
    Ok(K::split(list))
}

/// The watch's events from `resource_version` on.
async fn watch<K: Watched>(
    api: &Api<K>,
    config: &watcher::Config,
    resource_version: &str,
) -> kube::Result<BoxStream<'static, kube::Result<Change<K>>>> {
    use http_body_util::BodyExt;

    let request = kube::core::Request::new(api.resource_url()).watch(&watch_params(config), resource_version);
    let body = send(api, request, K::WATCH_ACCEPT).await?.into_body();
    Ok(frames(body.into_data_stream())
        .map(|frame| frame.and_then(|f| event::<K>(&f).map_err(wire_error)))
        .boxed())
}

/// The length-delimited frames of a watch body.
fn frames<S, B>(body: S) -> impl Stream<Item = kube::Result<BytesMut>> + Send
where
    S: Stream<Item = kube::Result<B>> + Send + Unpin,
    B: Buf,
{
    futures::stream::unfold(
        (body, BytesMut::new(), false),
        |(mut body, mut buf, done)| async move {
            if done {
                return None;
            }
            loop {
                if let Some(prefix) = buf.first_chunk::<4>() {
                    let len = u32::from_be_bytes(*prefix) as usize;
                    if buf.len() >= 4 + len {
                        buf.advance(4);
                        let frame = buf.split_to(len);
                        return Some((Ok(frame), (body, buf, false)));
                    }
                }
                match body.next().await {
                    Some(Ok(mut chunk)) => {
                        while chunk.has_remaining() {
                            let part = chunk.chunk();
                            buf.extend_from_slice(part);
                            let n = part.len();
                            chunk.advance(n);
                        }
                    }
                    Some(Err(e)) => return Some((Err(e), (body, buf, true))),
                    None if buf.is_empty() => return None,
                    None => return Some((Err(wire_error(WireError::Truncated)), (body, buf, true))),
                }
            }
        },
    )
}

/// A frame's watch event.
fn event<K: Watched>(frame: &[u8]) -> Result<Change<K>, WireError> {
    let event = pb_meta::WatchEvent::decode(frame)?;
    let raw = event.object.and_then(|o| o.raw).unwrap_or_default();
    let object = || open_kind::<K::Item>(&raw, K::ITEM_KIND).map(K::from_item);
    Ok(match event.r#type.as_deref().unwrap_or_default() {
        "ADDED" => Change::Added(object()?),
        "MODIFIED" => Change::Modified(object()?),
        "DELETED" => Change::Deleted(object()?),
        "BOOKMARK" => Change::Bookmark(object()?),
        "ERROR" => Change::Error(Box::new(status(http::StatusCode::INTERNAL_SERVER_ERROR, &raw))),
        other => return Err(WireError::EventType(other.to_owned())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from the local plane's kube-apiserver (v1.37): a protobuf watch of pods labelled
    /// `app=x` (`timeoutSeconds=4`) while pod `p` was created, deleted with no grace period, and
    /// the watch timed out; and the same of service `s` as `PartialObjectMetadata`.
    const POD_WATCH: &[u8] = include_bytes!("fixtures/pod_watch.bin");
    const SERVICE_WATCH: &[u8] = include_bytes!("fixtures/service_watch.bin");
    /// The lists before those watches, in the same encodings.
    const POD_LIST: &[u8] = include_bytes!("fixtures/pod_list.bin");
    const SERVICE_LIST: &[u8] = include_bytes!("fixtures/service_list.bin");

    /// The changes of a captured body, delivered in chunks of `chunk` bytes.
    fn changes<K: Watched>(body: &'static [u8], chunk: usize) -> Vec<Change<K>> {
        let chunks = body.chunks(chunk).map(Ok::<_, kube::Error>);
        let frames = frames(futures::stream::iter(chunks));
        futures::executor::block_on(frames.map(|f| event::<K>(&f.unwrap()).unwrap()).collect())
    }

    fn kinds<K>(changes: &[Change<K>]) -> Vec<&'static str> {
        let kind = |c: &Change<K>| match c {
            Change::Added(_) => "ADDED",
            Change::Modified(_) => "MODIFIED",
            Change::Deleted(_) => "DELETED",
            Change::Bookmark(_) => "BOOKMARK",
            Change::Error(_) => "ERROR",
        };
        changes.iter().map(kind).collect()
    }

    #[test]
    fn a_captured_pod_watch_reads_whole_however_it_is_chunked() {
        let whole = changes::<ObservedPod>(POD_WATCH, POD_WATCH.len());
        assert_eq!(
            kinds(&whole),
            ["ADDED", "BOOKMARK", "MODIFIED", "DELETED", "BOOKMARK"]
        );
        for chunk in [1, 3, 4, 5, 1000] {
            assert_eq!(
                changes::<ObservedPod>(POD_WATCH, chunk),
                whole,
                "chunks of {chunk}"
            );
        }
        let Change::Deleted(pod) = &whole[3] else {
            unreachable!()
        };
        assert_eq!(pod.metadata.name.as_deref(), Some("p"));
        assert_eq!(pod.labels().get("app").map(String::as_str), Some("x"));
        assert!(pod.metadata.deletion_timestamp.is_some());
        assert!(pod.metadata.uid.is_some());
        let Change::Bookmark(mark) = &whole[4] else {
            unreachable!()
        };
        let rv = |o: &ObservedPod| o.resource_version().unwrap().parse::<u64>().unwrap();
        assert!(rv(mark) >= rv(pod), "a bookmark moves the resourceVersion on");
    }

    #[test]
    fn a_captured_service_watch_is_metadata_only() {
        let seen = changes::<ObservedService>(SERVICE_WATCH, 7);
        assert_eq!(
            kinds(&seen),
            ["ADDED", "BOOKMARK", "DELETED", "BOOKMARK", "BOOKMARK"]
        );
        let Change::Added(service) = &seen[0] else {
            unreachable!()
        };
        assert_eq!(service.metadata.name.as_deref(), Some("s"));
        assert_eq!(service.labels().get("app").map(String::as_str), Some("x"));
        assert_eq!(
            service.types.as_ref().map(|t| t.kind.as_str()),
            Some("PartialObjectMetadata")
        );
    }

    #[test]
    fn captured_lists_open_to_their_items_and_resource_version() {
        let (meta, pods) = ObservedPod::split(open_kind(POD_LIST, ObservedPod::LIST_KIND).unwrap());
        assert!(meta.and_then(|m| m.resource_version).is_some());
        let pod = ObservedPod::from_item(pods.into_iter().next().unwrap());
        assert_eq!(pod.metadata.name.as_deref(), Some("p"));
        assert!(pod.status.is_some_and(|s| s.phase.is_some()));
        let (meta, services) =
            ObservedService::split(open_kind(SERVICE_LIST, ObservedService::LIST_KIND).unwrap());
        assert!(meta.and_then(|m| m.resource_version).is_some());
        assert_eq!(services.len(), 1);
    }

    #[test]
    fn gone_relists_other_errors_keep_watching_and_an_end_rewatches() {
        let gone = kube::core::Status::failure("too old resource version: 1 (42)", "Expired").with_code(410);
        let quiet = || futures::stream::empty().boxed();
        let (event, next) =
            watched::<ObservedPod>(Some(Ok(Change::Error(Box::new(gone)))), "7".into(), quiet());
        assert!(matches!(event, Some(Err(watcher::Error::WatchError(e))) if e.code == 410));
        assert!(matches!(next, State::Empty));
        let other = kube::core::Status::failure("internal", "InternalError").with_code(500);
        let (_, next) = watched::<ObservedPod>(Some(Ok(Change::Error(Box::new(other)))), "7".into(), quiet());
        assert!(matches!(next, State::Watching { resource_version, .. } if resource_version == "7"));
        let (event, next) = watched::<ObservedPod>(None, "7".into(), quiet());
        assert!(event.is_none());
        assert!(matches!(next, State::InitListed { resource_version } if resource_version == "7"));
        let mut mark = ObservedPod::default();
        mark.metadata.resource_version = Some("9".into());
        let (event, next) = watched(Some(Ok(Change::Bookmark(mark))), "7".into(), quiet());
        assert!(event.is_none());
        assert!(matches!(next, State::Watching { resource_version, .. } if resource_version == "9"));
    }

    #[test]
    fn a_frame_cut_short_is_an_error() {
        let cut = &POD_WATCH[..POD_WATCH.len() - 1];
        let frames: Vec<_> =
            futures::executor::block_on(frames(futures::stream::iter([Ok::<_, kube::Error>(cut)])).collect());
        assert!(frames[..4].iter().all(Result::is_ok));
        assert!(matches!(&frames[4], Err(kube::Error::Service(_))));
    }
}
