//! Writing a job's events (`events.k8s.io/v1`), each one created once, from one queue per
//! process.
//!
//! Why not kube-runtime's `Recorder`: it folds repeats of an event into a series, and to do so
//! keeps every event it wrote for six minutes and scans that cache on each write. kfop emits an
//! event only on a transition, so there is nothing to fold, and the cache was the operator's
//! largest memory after its caches (about 7 MB at 1 job/s, growing for the first six minutes of a
//! soak) and an O(events) scan per event in a burst.
//!
//! Why one queue: events are informative, so a reconcile does not wait for them, but a task per
//! reconcile sending its events at once put thousands of event creates in flight in a burst
//! (1,000 jobs, 9 events each), competing with the pod creates at the API server and holding a
//! request's buffers each. One sender with a few creates in flight keeps them behind the work.
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::Api;
use tokio::sync::mpsc;

use crate::plan::{EventType, JobEvent};

/// Events waiting to be sent, at most (a few hundred bytes each: the event is built when it is
/// sent). A burst of 1,000 jobs queues about 9,000, which must not slow the reconciles that
/// queue them (a bound of 4,096 did: reconciles then waited on event creates); past the bound a
/// reconcile waits for room, so a server that never keeps up slows the operator instead of
/// growing its memory.
const QUEUED: usize = 16_384;
/// Event creates in flight at once.
const IN_FLIGHT: usize = 8;

/// Who reports the events: `reporting_controller` (the operator's name) and its instance.
#[derive(Debug)]
struct Reporter {
    controller: String,
    instance: String,
}

/// An event as queued: what happened, to which job, when.
type Queued = (JobEvent, Arc<ObjectReference>, Timestamp);

/// Queues events from this process; one task sends them.
#[derive(Clone)]
pub struct EventWriter {
    queue: mpsc::Sender<Queued>,
    reporter: Arc<Reporter>,
}

/// The last name suffix handed out, so two events of one object in one nanosecond do not clash.
static LAST_SUFFIX: AtomicU64 = AtomicU64::new(0);

/// Creates the queued events until every writer is gone.
async fn send_all(client: Client, reporter: Arc<Reporter>, mut queue: mpsc::Receiver<Queued>) {
    futures::stream::poll_fn(|cx| queue.poll_recv(cx))
        .for_each_concurrent(IN_FLIGHT, |(event, regarding, at)| {
            let client = client.clone();
            let event = reporter.build(&event, &regarding, at);
            async move {
                let namespace = event.metadata.namespace.as_deref().unwrap_or("default");
                let api: Api<Event> = Api::namespaced(client, namespace);
                if let Err(e) = crate::wire::create(&api, &event).await {
                    let regarding = event.regarding.as_ref().and_then(|r| r.name.as_deref());
                    tracing::warn!(job = ?regarding, reason = ?event.reason, error = %e, "could not publish event");
                }
            }
        })
        .await;
}

impl EventWriter {
    /// A writer whose events `client` creates, from a task spawned on the current runtime.
    pub fn new(client: Client, controller: &str) -> Self {
        let (queue, queued) = mpsc::channel(QUEUED);
        let reporter = Arc::new(Reporter {
            controller: controller.to_owned(),
            instance: controller.to_owned(),
        });
        tokio::spawn(send_all(client, reporter.clone(), queued));
        Self { queue, reporter }
    }

    /// Queues `events` about `regarding`, stamped now; waits only while the queue is full.
    pub async fn publish(&self, events: Vec<JobEvent>, regarding: ObjectReference) {
        let (now, regarding) = (Timestamp::now(), Arc::new(regarding));
        for event in events {
            if self.queue.send((event, regarding.clone(), now)).await.is_err() {
                tracing::warn!(job = ?regarding.name, "event sender stopped; events dropped");
                return;
            }
        }
    }
}

impl Reporter {
    /// The event object for `event` about `regarding` at `now` (pure but for the name suffix).
    pub fn build(&self, event: &JobEvent, regarding: &ObjectReference, now: Timestamp) -> Event {
        let nanos = u64::try_from(now.as_nanosecond()).unwrap_or_default();
        let suffix = LAST_SUFFIX
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| {
                Some(nanos.max(last + 1))
            })
            .map_or(nanos, |last| nanos.max(last + 1));
        Event {
            action: Some(event.reason.clone()),
            reason: Some(event.reason.clone()),
            note: Some(event.message.clone()),
            type_: Some(
                match event.type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .to_owned(),
            ),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            related: event.related.clone(),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            metadata: ObjectMeta {
                namespace: regarding.namespace.clone(),
                name: Some(format!(
                    "{}.{suffix:x}",
                    regarding.name.as_deref().unwrap_or(&self.controller)
                )),
                ..ObjectMeta::default()
            },
            ..Event::default()
        }
    }
}

impl std::fmt::Debug for EventWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventWriter")
            .field("reporter", &self.reporter)
            .field("queued", &(QUEUED - self.queue.capacity()))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer() -> Reporter {
        Reporter {
            controller: "pytorchjob-controller".into(),
            instance: "op-0".into(),
        }
    }

    #[tokio::test]
    async fn events_are_named_after_their_object_and_never_clash() {
        let regarding = ObjectReference {
            kind: Some("PyTorchJob".into()),
            name: Some("pt".into()),
            namespace: Some("ns".into()),
            ..ObjectReference::default()
        };
        let event = JobEvent {
            type_: EventType::Warning,
            reason: "PyTorchJobFailed".into(),
            message: "failed".into(),
            related: None,
        };
        let now = Timestamp::now();
        let (a, b) = (
            writer().build(&event, &regarding, now),
            writer().build(&event, &regarding, now),
        );
        assert_ne!(a.metadata.name, b.metadata.name, "one nanosecond, two events");
        assert!(a.metadata.name.as_deref().unwrap().starts_with("pt."));
        assert_eq!(a.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(a.type_.as_deref(), Some("Warning"));
        assert_eq!(
            (a.reason.as_deref(), a.action.as_deref()),
            (Some("PyTorchJobFailed"), Some("PyTorchJobFailed"))
        );
        assert_eq!(a.note.as_deref(), Some("failed"));
        assert_eq!(a.reporting_controller.as_deref(), Some("pytorchjob-controller"));
        assert_eq!(a.reporting_instance.as_deref(), Some("op-0"));
        assert_eq!(a.regarding, Some(regarding));
        assert!(a.series.is_none());
    }

    /// Every queued event is created, with at most
    /// [`IN_FLIGHT`] creates open at once.
    #[tokio::test]
    async fn the_queue_creates_every_event_a_few_at_a_time() {
        use std::sync::atomic::AtomicUsize;

        let (open, most, paths) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicUsize::new(0)),
            Arc::new(std::sync::Mutex::new(Vec::new())),
        );
        let service = {
            let (open, most, paths) = (open.clone(), most.clone(), paths.clone());
            tower::service_fn(move |request: http::Request<kube::client::Body>| {
                let (open, most, paths) = (open.clone(), most.clone(), paths.clone());
                async move {
                    let now = open.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    paths.lock().unwrap().push(request.uri().path().to_owned());
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                    open.fetch_sub(1, Ordering::SeqCst);
                    Ok::<_, std::convert::Infallible>(http::Response::new(kube::client::Body::from(
                        b"{}".to_vec(),
                    )))
                }
            })
        };
        let writer = EventWriter::new(Client::new(service, "default"), "c");
        let regarding = ObjectReference {
            name: Some("pt".into()),
            namespace: Some("ns".into()),
            ..ObjectReference::default()
        };
        let events: Vec<JobEvent> = (0..40)
            .map(|i| JobEvent {
                type_: EventType::Normal,
                reason: format!("R{i}"),
                message: String::new(),
                related: None,
            })
            .collect();
        writer.publish(events, regarding).await;
        drop(writer);
        for _ in 0..200 {
            if paths.lock().unwrap().len() == 40 && open.load(Ordering::SeqCst) == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let paths = paths.lock().unwrap();
        assert_eq!(paths.len(), 40);
        assert!(
            paths
                .iter()
                .all(|p| p == "/apis/events.k8s.io/v1/namespaces/ns/events")
        );
        let most = most.load(Ordering::SeqCst);
        assert!((2..=IN_FLIGHT).contains(&most), "{most} creates at once");
    }
}
