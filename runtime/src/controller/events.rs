//! Writing a job's events (`events.k8s.io/v1`), each one created once.
//!
//! Why not kube-runtime's `Recorder`: it folds repeats of an event into a series, and to do so
//! keeps every event it wrote for six minutes and scans that cache on each write. kfop emits an
//! event only on a transition, so there is nothing to fold, and the cache was the operator's
//! largest memory after its caches (about 7 MB at 1 job/s, growing for the first six minutes of a
//! soak) and an O(events) scan per event in a burst.
use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};

use crate::plan::{EventType, JobEvent};

/// Creates events as `reporting_controller` (the operator's name) from this process.
#[derive(Clone)]
pub struct EventWriter {
    client: Client,
    controller: String,
    instance: String,
}

/// The last name suffix handed out, so two events of one object in one nanosecond do not clash.
static LAST_SUFFIX: AtomicU64 = AtomicU64::new(0);

impl EventWriter {
    pub fn new(client: Client, controller: &str) -> Self {
        Self {
            client,
            controller: controller.to_owned(),
            instance: controller.to_owned(),
        }
    }

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

    /// Creates `event` about `regarding`.
    pub async fn create(&self, event: &JobEvent, regarding: &ObjectReference) -> Result<(), kube::Error> {
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        api.create(
            &PostParams::default(),
            &self.build(event, regarding, Timestamp::now()),
        )
        .await
        .map(|_| ())
    }
}

impl std::fmt::Debug for EventWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventWriter")
            .field("controller", &self.controller)
            .field("instance", &self.instance)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer() -> EventWriter {
        EventWriter {
            client: crate::testing::offline_client(),
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
}
