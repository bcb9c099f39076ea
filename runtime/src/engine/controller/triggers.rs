//! Routes each event of a shared child watch (pods, services, owned kinds) to the controller of
//! the job kind that controls the child, as the owner's name.
//!
//! Why not kube-runtime's shared reflector (`reflect_shared` + `ReflectHandle`): its handle
//! receives a reference and reads the object from the store when polled; if the child has been
//! deleted from the store in between, the handle returns `Pending` without registering a waker,
//! and the controller's `SelectAll` never polls that stream again. Every later pod event of that
//! controller was lost (#11: jobs stranded after other kinds' pods were deleted). An owner name
//! taken from the event itself cannot go stale, and deletions trigger too (a pod deleted from
//! outside must be recreated).
use std::time::Duration;

use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use futures::{Stream, StreamExt};
use kube::runtime::scheduler::{ScheduleRequest, scheduler};
use tokio::time::Instant;

use crate::child_index::Cached;

/// The job a child event is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Owner {
    pub namespace: Option<String>,
    pub name: String,
}

impl Owner {
    /// The job itself, as its children's events name it.
    pub fn of(job: &impl kube::ResourceExt) -> Self {
        Self {
            namespace: job.namespace(),
            name: job.name_any(),
        }
    }
}

/// One child change, as its owner's controller receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trigger {
    pub owner: Owner,
    /// The child failed, is being deleted or is gone: a change the job must answer at once
    /// (restart, replace, fail), not a replica count that can wait for the batch.
    pub failure: bool,
}

/// What one controller receives: the owners of children that changed.
pub type Triggers = UnboundedReceiver<Trigger>;

/// Names a job whose children's events the router drops, as a lost watch event would be: a
/// fault injected by tests of the lost-event accounting (`kfop_resync_found_work_total`), which
/// must count the job a resync then finds work for. Only in builds with the `fault-injection`
/// feature, which the benchmark enables and a release image (`-p kfop-operator`) does not.
#[cfg(feature = "fault-injection")]
pub const DROP_CHILD_EVENTS_ENV: &str = "KFOP_FAULT_DROP_CHILD_EVENTS_OF";

/// Makes failures wait for the child batch like any other child change, as before they were
/// answered at once: the benchmark's baseline for the failure reaction (`fault-injection` only).
#[cfg(feature = "fault-injection")]
pub const BATCH_FAILURES_ENV: &str = "KFOP_FAULT_BATCH_FAILURES";

/// Whether [`BATCH_FAILURES_ENV`] is set: failures then wait for the batch.
pub fn failures_batched() -> bool {
    #[cfg(feature = "fault-injection")]
    if std::env::var_os(BATCH_FAILURES_ENV).is_some_and(|v| !v.is_empty()) {
        tracing::warn!("failures wait for the child batch ({BATCH_FAILURES_ENV})");
        return true;
    }
    false
}

/// The controllers' subscriptions, by the job kind each reconciles. Controllers subscribe while
/// the watches run (frameworks registered at run time); a stopped one's route is dropped.
#[derive(Debug, Default)]
pub struct Router {
    routes: std::sync::RwLock<Vec<Route>>,
    /// [`DROP_CHILD_EVENTS_ENV`].
    #[cfg(feature = "fault-injection")]
    drop_children_of: DropChildren,
}

/// The job whose child events a fault-injection build drops, read once.
#[cfg(feature = "fault-injection")]
#[derive(Debug)]
struct DropChildren(Option<String>);

#[cfg(feature = "fault-injection")]
impl Default for DropChildren {
    fn default() -> Self {
        let job = std::env::var(DROP_CHILD_EVENTS_ENV)
            .ok()
            .filter(|name| !name.is_empty());
        if let Some(job) = &job {
            tracing::warn!(%job, "dropping every child event of this job ({DROP_CHILD_EVENTS_ENV})");
        }
        Self(job)
    }
}

#[derive(Debug)]
struct Route {
    api_version: String,
    kind: String,
    sender: UnboundedSender<Trigger>,
}

impl Router {
    /// Subscribes the controller of jobs of `api_version`/`kind` (any version of its group).
    pub fn subscribe(&self, api_version: &str, kind: &str) -> Triggers {
        let (sender, receiver) = unbounded();
        let mut routes = self
            .routes
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        routes.retain(|r| !r.sender.is_closed());
        routes.push(Route {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            sender,
        });
        receiver
    }

    /// Sends the owner of `child` to the controller of its kind (a child has at most one
    /// controller; children of kinds nobody here reconciles are dropped); `failure` marks a
    /// change to answer at once ([`Trigger::failure`]).
    pub fn route<C: Cached>(&self, child: &C, failure: bool)
    where
        C::DynamicType: Eq + std::hash::Hash + Clone,
    {
        let Some(controller) = child.controller() else {
            return;
        };
        #[cfg(feature = "fault-injection")]
        if self.drop_children_of.0.as_deref() == Some(controller.name) {
            return;
        }
        let routes = self
            .routes
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for route in routes.iter() {
            if route.kind == controller.kind && group(&route.api_version) == group(controller.api_version) {
                let owner = Owner {
                    namespace: controller.namespace.map(str::to_owned),
                    name: controller.name.to_owned(),
                };
                // A closed receiver is a controller that has stopped; nothing is left to tell.
                let _ = route.sender.unbounded_send(Trigger { owner, failure });
            }
        }
    }
}

/// The API group of an apiVersion (`kubeflow.org/v1` -> `kubeflow.org`; the core group's `v1`
/// -> empty). Children are routed by their controller's group and kind, whatever version their
/// owner reference names: one kind's jobs may be served in several versions, and a job created
/// in another than the one its controller reads names that one (an MPIJob created as `v1`).
fn group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

/// Each owner of `triggers` once per burst: `window` after its first trigger, with every later
/// trigger of the same owner until then folded in, and never sooner than `gap` after the owner's
/// last reconcile started or was asked for (`last_run`), so pods of one job that change at
/// moments a fraction of a second apart cost one reconcile and one status write, as Kubernetes'
/// Job controller batches its pods' updates. A failure is the exception: it is answered
/// [`FAILURE_WINDOW`] after it arrives, whatever the gap (a job restarts or fails on it, and its
/// reaction is what users wait for). kube-runtime's scheduler keeps the earliest time asked for
/// a message: a trigger that finds its owner scheduled joins that burst, and a failure pulls the
/// burst forward.
pub fn coalesced(
    triggers: impl Stream<Item = Trigger> + Send + 'static,
    window: Duration,
    gap: Duration,
    last_run: impl Fn(&Owner) -> Option<Instant> + Send + 'static,
) -> impl Stream<Item = Owner> + Send {
    scheduler(triggers.map(move |Trigger { owner, failure }| {
        let now = Instant::now();
        let run_at = if failure {
            now + FAILURE_WINDOW
        } else {
            let not_before = last_run(&owner).map_or(now, |last| last + gap);
            (now + window).max(not_before)
        };
        ScheduleRequest {
            message: owner,
            run_at,
        }
    }))
}

/// How long a failure waits for others of the same job (pods that fail together, as on a lost
/// node, cost one reconcile).
pub const FAILURE_WINDOW: Duration = Duration::from_millis(20);

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
    use kube::api::DynamicObject;

    fn child(owner_kind: &str, controller: bool) -> DynamicObject {
        let mut child = DynamicObject::new(
            "c",
            &kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()),
        );
        child.metadata = ObjectMeta {
            name: Some("c".into()),
            namespace: Some("ns".into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "kubeflow.org/v1".into(),
                kind: owner_kind.into(),
                name: "job".into(),
                uid: "u".into(),
                controller: Some(controller),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        };
        child
    }

    #[tokio::test]
    async fn children_reach_only_their_controllers_kind() {
        let router = Router::default();
        let mut pytorch = router.subscribe("kubeflow.org/v1", "PyTorchJob");
        let mut tf = router.subscribe("kubeflow.org/v1", "TFJob");
        router.route(&child("TFJob", true), false);
        router.route(&child("PyTorchJob", false), false);
        router.route(&child("PyTorchJob", true), false);
        drop(router);
        let owner = Owner {
            namespace: Some("ns".into()),
            name: "job".into(),
        };
        let trigger = Trigger {
            owner: owner.clone(),
            failure: false,
        };
        assert_eq!(pytorch.next().await, Some(trigger.clone()));
        assert_eq!(
            pytorch.next().await,
            None,
            "a non-controller owner triggers nothing"
        );
        assert_eq!(tf.next().await, Some(trigger));
        assert_eq!(tf.next().await, None);
    }

    #[test]
    fn children_naming_another_version_of_the_kind_reach_its_controller() {
        let router = Router::default();
        let mut mpi = router.subscribe("kubeflow.org/v2beta1", "MPIJob");
        let mut other_group = router.subscribe("example.com/v1", "MPIJob");
        router.route(&child("MPIJob", true), false);
        assert_eq!(
            mpi.try_recv().unwrap().owner.name,
            "job",
            "a v1 owner reaches the v2beta1 controller"
        );
        assert!(other_group.try_recv().is_err(), "the group must match");
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_one_owners_changes_is_one_trigger_after_the_window() {
        use std::collections::HashMap;
        use std::sync::{Arc, Mutex};

        let router = Router::default();
        let triggers = router.subscribe("kubeflow.org/v1", "TFJob");
        // When each owner's reconcile last started, as the controller's activity records it.
        let started: Arc<Mutex<HashMap<Owner, Instant>>> = Arc::default();
        let runs = started.clone();
        let mut out = Box::pin(coalesced(
            triggers,
            Duration::from_millis(250),
            Duration::from_secs(1),
            move |owner| runs.lock().unwrap().get(owner).copied(),
        ));
        // Each owner the stream sends is reconciled at once.
        macro_rules! reconcile {
            () => {{
                let owner = out.next().await.unwrap();
                started
                    .lock()
                    .unwrap()
                    .insert(owner.clone(), Instant::now());
                owner
            }};
        }
        let start = Instant::now();
        for _ in 0..3 {
            router.route(&child("TFJob", true), false);
            // Polled as the controller does, so each change is read when it is sent.
            assert!(futures::poll!(out.next()).is_pending(), "held for the window");
            tokio::time::advance(Duration::from_millis(50)).await;
        }
        let first = reconcile!();
        assert_eq!(first.name, "job");
        assert_eq!(
            start.elapsed(),
            Duration::from_millis(250),
            "fired at the first change's window, the later changes folded in"
        );

        // A change within a second of the reconcile waits for the gap, and the changes until
        // then join it.
        router.route(&child("TFJob", true), false);
        assert!(futures::poll!(out.next()).is_pending());
        tokio::time::advance(Duration::from_millis(500)).await;
        router.route(&child("TFJob", true), false);
        assert_eq!(reconcile!(), first);
        assert_eq!(
            start.elapsed(),
            Duration::from_millis(1250),
            "fired a gap after the reconcile"
        );

        // Another owner is not held by this one's gap.
        let mut other = child("TFJob", true);
        if let Some(owners) = other.metadata.owner_references.as_mut() {
            owners[0].name = "other".into();
        }
        router.route(&other, false);
        assert_eq!(reconcile!().name, "other");
        assert_eq!(start.elapsed(), Duration::from_millis(1500));

        // After a quiet second, a change waits only its own window again.
        tokio::time::advance(Duration::from_secs(5)).await;
        let quiet = Instant::now();
        router.route(&child("TFJob", true), false);
        assert_eq!(reconcile!(), first);
        assert_eq!(quiet.elapsed(), Duration::from_millis(250));
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_is_answered_at_once_whatever_the_gap() {
        let router = Router::default();
        let triggers = router.subscribe("kubeflow.org/v1", "TFJob");
        // The job's reconcile has just started: an ordinary change would wait a second.
        let started = Instant::now();
        let mut out = Box::pin(coalesced(
            triggers,
            Duration::from_millis(250),
            Duration::from_secs(1),
            move |_| Some(started),
        ));
        router.route(&child("TFJob", true), false);
        assert!(
            futures::poll!(out.next()).is_pending(),
            "a count waits for the gap"
        );
        tokio::time::advance(Duration::from_millis(100)).await;
        router.route(&child("TFJob", true), true);
        assert_eq!(out.next().await.map(|o| o.name).as_deref(), Some("job"));
        assert_eq!(
            started.elapsed(),
            Duration::from_millis(100) + FAILURE_WINDOW,
            "the failure pulled the waiting burst forward"
        );
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(
            futures::poll!(out.next()).is_pending(),
            "the earlier count was folded into the failure's reconcile"
        );
    }

    #[cfg(feature = "fault-injection")]
    #[test]
    fn the_injected_fault_drops_only_the_named_jobs_children() {
        let router = Router {
            drop_children_of: DropChildren(Some("job".into())),
            ..Router::default()
        };
        let mut tf = router.subscribe("kubeflow.org/v1", "TFJob");
        router.route(&child("TFJob", true), false);
        assert!(tf.try_recv().is_err(), "dropped");
        let mut other = child("TFJob", true);
        if let Some(owners) = other.metadata.owner_references.as_mut() {
            owners[0].name = "other".into();
        }
        router.route(&other, false);
        assert_eq!(tf.try_recv().unwrap().owner.name, "other");
    }

    #[test]
    fn a_stopped_controller_does_not_stop_routing() {
        let router = Router::default();
        drop(router.subscribe("kubeflow.org/v1", "TFJob"));
        let mut alive = router.subscribe("kubeflow.org/v1", "TFJob");
        router.route(&child("TFJob", true), false);
        assert!(alive.try_recv().is_ok());
    }
}
