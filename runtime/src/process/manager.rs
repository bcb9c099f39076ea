//! The manager: many frameworks' controllers in one process with one client, one shared pod watch
//! and one shared service watch, a metrics and health endpoint, and optional leader election.
use std::net::SocketAddr;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt, TryStreamExt};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;

use crate::child_index::{Cached, Children};
use crate::compact::{CachedPod, CachedService, compacted};
use crate::controller::{
    self, Activity, Context, ControllerConfig, Created, Deleted, Router, Triggers, Written,
};
use crate::error::{Error, Result};
use crate::framework::{Framework, Loaded, ObservedPod, ObservedService};
use crate::labels::OPERATOR_NAME;
use crate::metrics::Metrics;

/// Leader election through a coordination.k8s.io Lease.
#[derive(Debug, Clone)]
pub struct LeaderElection {
    pub lease_name: String,
    pub namespace: String,
    /// This replica's identity (the pod name in a Deployment).
    pub identity: String,
    /// How long a lease lasts without renewal; another replica takes over after it expires.
    pub lease_duration_secs: u64,
}

/// How the manager runs.
#[derive(Debug, Clone, Default)]
pub struct ManagerConfig {
    pub controller: ControllerConfig,
    /// Where `/metrics`, `/healthz` and `/readyz` are served; none when unset.
    pub metrics_addr: Option<SocketAddr>,
    pub leader_election: Option<LeaderElection>,
    /// The conversion webhook, served when a converter is registered.
    pub webhook: Option<crate::webhook::WebhookConfig>,
    /// Event reporter name (`reportingController`).
    pub reporter: String,
}

/// What a framework's controller is started with: the manager's shared parts, the owners of its
/// changed children and the caches of its other owned kinds.
type Start =
    Box<dyn FnOnce(Shared, Triggers, Vec<Children<DynamicObject>>) -> BoxFuture<'static, Result<()>> + Send>;

/// A registered framework: its name, its job kind, the other kinds it owns, and how to start its
/// controller.
struct Registered {
    name: String,
    job_kind: (String, String),
    kinds: Vec<ApiResource>,
    start: Start,
}

/// What every registered framework gets from the manager.
#[derive(Clone)]
struct Shared {
    client: Client,
    config: ControllerConfig,
    metrics: Arc<Metrics>,
    events: controller::EventWriter,
    pods: Children<CachedPod>,
    services: Children<CachedService>,
    priority_classes: Option<Store<PriorityClass>>,
    kueue_workloads: Option<Store<DynamicObject>>,
    shutdown: watch::Receiver<bool>,
}

/// Runs registered frameworks until shutdown.
pub struct Manager {
    client: Client,
    config: ManagerConfig,
    metrics: Arc<Metrics>,
    frameworks: Vec<Registered>,
    converters: Vec<Arc<dyn crate::webhook::Converter>>,
    on_start: Option<OnStart>,
}

/// A task run beside the controllers, given the [`Registry`] to start more of them.
type OnStart = Box<dyn FnOnce(Registry) -> BoxFuture<'static, Result<()>> + Send>;

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.frameworks.iter().map(|r| r.name.as_str()).collect();
        f.debug_struct("Manager")
            .field("config", &self.config)
            .field("frameworks", &names)
            .finish()
    }
}

impl Manager {
    pub fn new(client: Client, config: ManagerConfig) -> Self {
        Self {
            client,
            config,
            metrics: Arc::new(Metrics::new()),
            frameworks: Vec::new(),
            converters: Vec::new(),
            on_start: None,
        }
    }

    /// The metrics every controller records into (served at `/metrics`).
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// Adds a framework's controller.
    #[must_use]
    pub fn register<F: Framework>(mut self, framework: Loaded<F>) -> Self {
        let name = framework.info().controller_name.clone();
        let job_kind = (
            framework.kind().api_version.clone(),
            framework.kind().kind.clone(),
        );
        let kinds = framework.owned_kinds();
        let start: Start = Box::new(move |shared: Shared, children, objects| {
            let mut shutdown = shared.shutdown.clone();
            let stop = async move {
                let _ = shutdown.wait_for(|stop| *stop).await;
            };
            start_controller(framework, shared, children, objects, stop).boxed()
        });
        self.frameworks.push(Registered {
            name,
            job_kind,
            kinds,
            start,
        });
        self
    }

    /// Runs `task` beside the controllers once the shared watches exist, with a [`Registry`]
    /// to start and stop controllers while the manager runs; the manager ends if it fails.
    #[must_use]
    pub fn on_start(
        mut self,
        task: impl FnOnce(Registry) -> BoxFuture<'static, Result<()>> + Send + 'static,
    ) -> Self {
        self.on_start = Some(Box::new(task));
        self
    }

    /// Adds a kind served in more than one version: the conversion webhook (see
    /// [`crate::webhook`]) converts it, on every replica, leader or not.
    #[must_use]
    pub fn convert(mut self, converter: Arc<dyn crate::webhook::Converter>) -> Self {
        self.converters.push(converter);
        self
    }

    /// Fails when this manager serves no conversion webhook while a CRD it converts names one
    /// that nothing serves (see [`crate::webhook::unserved`]); in-process managers of tests
    /// and the demo install their CRDs without conversion and skip this.
    pub async fn ensure_conversion_served(&self) -> Result<()> {
        if self.config.webhook.is_some() || self.converters.is_empty() {
            return Ok(());
        }
        Ok(crate::webhook::unserved::ensure_served(&self.client, &self.converters).await?)
    }

    /// Runs until `shutdown` resolves (then stops gracefully) or a controller fails.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()> + Send + 'static) -> Result<()> {
        let (ready_tx, ready_rx) = watch::channel(false);
        let (stop_tx, stop_rx) = watch::channel(false);
        let server = match self.config.metrics_addr {
            Some(addr) => {
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|e| Error::Server(crate::server::ServerError::Serve { addr, source: e }))?;
                let mut stop = stop_rx.clone();
                let stopped = async move {
                    let _ = stop.wait_for(|s| *s).await;
                };
                crate::server::serve(listener, self.metrics.clone(), ready_rx, stopped).boxed()
            }
            None => futures::future::pending().boxed(),
        };
        let server = tokio::spawn(server);
        let webhook = self.spawn_webhook(&stop_rx)?;
        let stopper = tokio::spawn(async move {
            shutdown.await;
            let _ = stop_tx.send(true);
        });

        let mut leadership = match &self.config.leader_election {
            Some(le) => {
                // A standby replica is ready: it does what it is there for (waiting to take
                // over), and a probe failing on it would stall rollouts and block drains under a
                // PodDisruptionBudget. As controller-runtime, the new leader stays ready while
                // its watches sync; one that cannot sync reports not ready.
                let _ = ready_tx.send(true);
                Some(Leadership::acquire(&self.client, le).await?)
            }
            None => None,
        };
        let lost_lease = async {
            match leadership.as_mut() {
                Some(l) => l.lost().await,
                None => futures::future::pending().await,
            }
        };
        let result = self.run_controllers(stop_rx, ready_tx, lost_lease.boxed()).await;
        if let Some(leadership) = leadership {
            leadership.release().await;
        }
        stopper.abort();
        server.abort();
        if let Some(webhook) = webhook {
            webhook.abort();
        }
        result
    }

    /// Starts the conversion webhook when a converter is registered; it runs beside the
    /// controllers, on standby replicas too, and logs (never ends the operator on) a failure.
    fn spawn_webhook(&self, stop: &watch::Receiver<bool>) -> Result<Option<tokio::task::JoinHandle<()>>> {
        let Some(config) = self
            .config
            .webhook
            .clone()
            .filter(|_| !self.converters.is_empty())
        else {
            return Ok(None);
        };
        let listener = crate::webhook::bind(config.addr)?;
        let converters = Arc::new(self.converters.clone());
        let client = self.client.clone();
        let mut stop = stop.clone();
        let stopped = async move {
            let _ = stop.wait_for(|s| *s).await;
        };
        Ok(Some(tokio::spawn(async move {
            if let Err(e) = crate::webhook::serve(client, config.options, converters, listener, stopped).await
            {
                tracing::error!(error = %e, "conversion webhook stopped");
            }
        })))
    }

    async fn run_controllers(
        self,
        stop: watch::Receiver<bool>,
        ready: watch::Sender<bool>,
        lost_lease: BoxFuture<'_, Error>,
    ) -> Result<()> {
        let watcher_config = watcher::Config::default().labels(OPERATOR_NAME);
        // Services are watched as metadata only (kube asks for PartialObjectMetadata): nothing
        // reads a child service's spec.
        let (pod_api, service_api): (Api<ObservedPod>, Api<ObservedService>) =
            match &self.config.controller.namespace {
                Some(ns) => (
                    Api::namespaced(self.client.clone(), ns),
                    Api::namespaced(self.client.clone(), ns),
                ),
                None => (Api::all(self.client.clone()), Api::all(self.client.clone())),
            };
        let (pod_store, pod_writer) = reflector::store::<CachedPod>();
        let (service_store, service_writer) = reflector::store::<CachedService>();
        let (pods, services) = (Children::new(pod_store, ()), Children::new(service_store, ()));
        // Under gang scheduling every job owns a PodGroup, and minResources (Volcano's and
        // scheduler-plugins'; a native PodGroup has none) weighs roles by their PriorityClass.
        let gang_kind = self.config.controller.gang.pod_group_api_resource();
        let weighs_priorities = gang_kind.is_some()
            && !matches!(
                self.config.controller.gang,
                crate::gang::GangScheduler::Native { .. }
            );
        let mut frameworks = self.frameworks;
        if let Some(kind) = &gang_kind {
            for registered in &mut frameworks {
                registered.kinds.push(kind.clone());
            }
        }
        let (priority_classes, priority_class_watch) = if weighs_priorities {
            let (store, writer) = reflector::store::<PriorityClass>();
            let watch = watcher(
                Api::<PriorityClass>::all(self.client.clone()),
                watcher::Config::default(),
            )
            .default_backoff()
            .reflect(writer)
            .for_each(|_| std::future::ready(()))
            .boxed();
            (Some(store), watch)
        } else {
            (None, futures::future::pending().boxed())
        };
        // Under Kueue pod groups a job reports why its group waits, from its Workload.
        let (kueue_workloads, kueue_workload_watch) = if self.config.controller.kueue_pod_groups {
            let kind = crate::gang::workload_api_resource();
            let api: Api<DynamicObject> = match &self.config.controller.namespace {
                Some(ns) => Api::namespaced_with(self.client.clone(), ns, &kind),
                None => Api::all_with(self.client.clone(), &kind),
            };
            let writer = reflector::store::Writer::<DynamicObject>::new(kind.clone());
            let store = writer.as_reader();
            let watch = watcher(api, watcher::Config::default())
                .default_backoff()
                .modify(crate::cache::slim_owned(&kind))
                .reflect(writer)
                .for_each(|_| std::future::ready(()))
                .boxed();
            (Some(store), watch)
        } else {
            (None, futures::future::pending().boxed())
        };
        let shared = Shared {
            client: self.client.clone(),
            config: self.config.controller.clone(),
            metrics: self.metrics.clone(),
            events: controller::EventWriter::new(self.client.clone(), &self.config.reporter),
            pods: pods.clone(),
            services: services.clone(),
            priority_classes,
            kueue_workloads,
            shutdown: stop.clone(),
        };
        // One shared watch per owned kind, however many frameworks own it, seeing only objects
        // labelled as children of those frameworks (an owned Service kind must not cache every
        // other framework's per-replica services a second time).
        let mut kinds: Vec<(ApiResource, Vec<&str>)> = Vec::new();
        // Kinds registered at run time own PodGroups too, under controller names unknown here:
        // the PodGroup watch then sees every operator-labelled one (a job has one PodGroup).
        let runtime_gang = gang_kind.as_ref().filter(|_| self.on_start.is_some());
        if let Some(kind) = runtime_gang {
            kinds.push((kind.clone(), Vec::new()));
        }
        for registered in &frameworks {
            for kind in &registered.kinds {
                match kinds.iter_mut().find(|(k, _)| same_kind(k, kind)) {
                    Some((_, owners)) => owners.push(&registered.name),
                    None => kinds.push((kind.clone(), vec![&registered.name])),
                }
            }
        }
        let object_caches: Vec<_> = kinds
            .iter()
            .map(|(kind, owners)| {
                let writer = reflector::store::Writer::<DynamicObject>::new(kind.clone());
                let selector = match runtime_gang {
                    Some(gang) if same_kind(gang, kind) => OPERATOR_NAME.to_owned(),
                    _ => format!("{OPERATOR_NAME} in ({})", owners.join(",")),
                };
                (kind.clone(), writer, selector)
            })
            .collect();
        let object_stores: Vec<Children<DynamicObject>> = object_caches
            .iter()
            .map(|(kind, writer, _)| Children::on_demand(writer.as_reader(), kind.clone()))
            .collect();

        // Every controller subscribes to the one router all child watches feed.
        let router = Router::default();
        let mut controllers = Vec::with_capacity(frameworks.len());
        for registered in frameworks {
            let (api_version, kind) = &registered.job_kind;
            let children = router.subscribe(api_version, kind);
            let stores = registered
                .kinds
                .iter()
                .filter_map(|kind| {
                    object_caches
                        .iter()
                        .zip(&object_stores)
                        .find(|((k, ..), _)| same_kind(k, kind))
                        .map(|(_, store)| store.clone())
                })
                .collect();
            controllers.push((registered.start)(shared.clone(), children, stores));
        }
        let router = Arc::new(router);
        let runtime_objects = object_caches
            .iter()
            .zip(&object_stores)
            .filter(|((kind, ..), _)| runtime_gang.is_some_and(|gang| same_kind(gang, kind)))
            .map(|(_, store)| store.clone())
            .collect();
        let on_start = match self.on_start {
            Some(task) => task(Registry {
                shared: shared.clone(),
                router: router.clone(),
                objects: runtime_objects,
            }),
            None => futures::future::pending().boxed(),
        };

        let object_watches =
            futures::future::join_all(object_caches.into_iter().zip(object_stores.clone()).map(
                |((kind, writer, selector), children)| {
                    let api: Api<DynamicObject> = match &self.config.controller.namespace {
                        Some(ns) => Api::namespaced_with(self.client.clone(), ns, &kind),
                        None => Api::all_with(self.client.clone(), &kind),
                    };
                    let router = router.clone();
                    // Started by the first reconcile of a job owning the kind: an operator whose
                    // cluster runs no MPIJob keeps no watch on Secrets, Roles, ... The watch's
                    // state (~7 kB) is boxed only then, not held by every waiting kind.
                    async move {
                        children.wanted().await;
                        let watch = watcher(api, watcher::Config::default().labels(&selector))
                            .default_backoff()
                            .modify(crate::cache::slim_owned(&kind));
                        Box::pin(route_children(watch, writer, children, router)).await;
                    }
                },
            ));
        let pod_watch = route_children(
            // In protobuf under `--wire-encoding protobuf`, as the creates.
            crate::wire::watch::watcher(pod_api, watcher_config.clone())
                .default_backoff()
                .map_ok(compacted::<ObservedPod, CachedPod>),
            pod_writer,
            pods.clone(),
            router.clone(),
        );
        let service_watch = route_children(
            crate::wire::watch::watcher(service_api, watcher_config)
                .default_backoff()
                .map_ok(compacted::<ObservedService, CachedService>),
            service_writer,
            services.clone(),
            router,
        );
        // Ready once the watches every job needs have synced; those of owned kinds start with
        // their first job, and its reconcile waits for them.
        let readiness = async move {
            // Not ready (the default) while a slow list keeps timing out the wait.
            while pods.synced().await.is_err() || services.synced().await.is_err() {}
            let _ = ready.send(true);
            futures::future::pending::<()>().await;
        };
        // Compiled controllers end on shutdown, or early on an error; with none (an operator of
        // run-time frameworks only) the manager still runs until shutdown.
        let mut stopping = stop.clone();
        let controllers = async move {
            futures::future::try_join_all(controllers).await?;
            let _ = stopping.wait_for(|s| *s).await;
            Ok::<_, Error>(())
        };
        tokio::select! {
            result = controllers => result,
            () = pod_watch => Ok(()),
            () = service_watch => Ok(()),
            _ = object_watches.then(|_| futures::future::pending::<()>()) => Ok(()),
            () = priority_class_watch => Ok(()),
            () = kueue_workload_watch => Ok(()),
            () = readiness => Ok(()),
            result = on_start => result,
            error = lost_lease => Err(error),
        }
    }
}

/// Runs `framework`'s controller with the manager's shared parts until `stop` completes.
async fn start_controller<F: Framework>(
    framework: Loaded<F>,
    shared: Shared,
    children: Triggers,
    objects: Vec<Children<DynamicObject>>,
    stop: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> Result<()> {
    let ctx = Arc::new(Context {
        client: shared.client,
        framework: Arc::new(framework),
        config: shared.config,
        metrics: shared.metrics,
        events: shared.events,
        pods: shared.pods,
        services: shared.services,
        objects,
        priority_classes: shared.priority_classes,
        kueue_workloads: shared.kueue_workloads,
        created: Created::default(),
        deleted: Deleted::default(),
        written: Written::default(),
        activity: Activity::default(),
    });
    controller::run(ctx, children, stop).await
}

/// Starts controllers while the manager runs, on its shared client, caches and watches: the
/// frameworks registered at run time ([`crate::dynamic`]). Such a framework owns no kinds
/// besides pods, services and (under gang scheduling) PodGroups, so it needs no watch of its
/// own.
#[derive(Clone)]
pub struct Registry {
    shared: Shared,
    router: Arc<Router>,
    /// The owned-object caches a run-time controller reads: the PodGroups under gang scheduling.
    objects: Vec<Children<DynamicObject>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").finish_non_exhaustive()
    }
}

/// A controller started through a [`Registry`]; [`Running::stop`] ends it.
#[derive(Debug)]
pub struct Running {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<()>>,
}

impl Running {
    /// Stops the controller and waits for its in-flight reconciles to finish.
    pub async fn stop(self) -> Result<()> {
        let _ = self.stop.send(true);
        self.task.await?
    }

    /// Whether the controller has ended by itself (its CRD missing, the manager stopping).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

impl Registry {
    /// The manager's client.
    pub fn client(&self) -> &Client {
        &self.shared.client
    }

    /// Starts `framework`'s controller; it runs until stopped or the manager stops.
    pub fn start<F: Framework>(&self, framework: Loaded<F>) -> Running {
        let children = self
            .router
            .subscribe(&framework.kind().api_version, &framework.kind().kind);
        let (stop, mut stopped) = watch::channel(false);
        let mut shutdown = self.shared.shutdown.clone();
        let until = async move {
            tokio::select! {
                _ = shutdown.wait_for(|s| *s) => {},
                _ = stopped.wait_for(|s| *s) => {},
            }
        };
        let task = tokio::spawn(start_controller(
            framework,
            self.shared.clone(),
            children,
            self.objects.clone(),
            until,
        ));
        Running { stop, task }
    }
}

/// Caches a child watch in `writer`, indexes it by owner in `children`, and routes every object
/// it touches (created, changed, deleted, or listed again or found gone after the watch
/// restarted, once the cache holds the new list) to the controller of its owner's kind. Ends
/// only if the watch stream does.
async fn route_children<K>(
    watch: impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
    writer: reflector::store::Writer<K>,
    children: Children<K>,
    router: Arc<Router>,
) where
    K: Cached,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    let reader = writer.as_reader();
    let noted = children.clone();
    let watch = watch.inspect(move |event| {
        if let Ok(event) = event {
            noted.note(event);
        }
    });
    let routed = crate::relist::settled(reflector::reflector(writer, watch), reader).for_each(|child| {
        if children.record(&child) {
            let gone = matches!(child, crate::relist::Settled::Gone(_));
            router.route(child.object(), child.object().answer_at_once(gone));
        }
        std::future::ready(())
    });
    futures::future::join(routed, children.follow_store()).await;
}

fn same_kind(a: &ApiResource, b: &ApiResource) -> bool {
    a.api_version == b.api_version && a.kind == b.kind
}

/// This replica's hold on the leader lease.
struct Leadership {
    leading: watch::Receiver<bool>,
    handle: tokio::task::JoinHandle<kube_lease_manager::Result<kube_lease_manager::LeaseManager>>,
}

impl Leadership {
    /// Waits until this replica holds the lease.
    async fn acquire(client: &Client, le: &LeaderElection) -> Result<Self> {
        let duration = le.lease_duration_secs.max(2);
        let manager = LeaseManagerBuilder::new(client.clone(), le.lease_name.clone())
            .with_namespace(le.namespace.clone())
            .with_identity(le.identity.clone())
            // kube-lease-manager requires grace < duration; renew a third of the way before expiry.
            .with_grace((duration / 3).max(1))
            .with_duration(duration)
            .build()
            .await
            .map_err(|e| Error::LeaderElection {
                what: "starting the lease manager",
                source: Some(Box::new(e)),
            })?;
        let (mut leading, handle) = manager.watch().await;
        tracing::info!(lease = %le.lease_name, identity = %le.identity, "waiting for the leader lease");
        leading
            .wait_for(|l| *l)
            .await
            .map_err(|e| Error::LeaderElection {
                what: "waiting for the lease",
                source: Some(Box::new(e)),
            })?;
        tracing::info!(lease = %le.lease_name, "became leader");
        Ok(Self { leading, handle })
    }

    /// Resolves when the lease is lost.
    async fn lost(&mut self) -> Error {
        let lost = self.leading.wait_for(|l| !*l).await.is_ok();
        Error::LeaderElection {
            what: if lost {
                "lost the lease"
            } else {
                "the lease manager stopped"
            },
            source: None,
        }
    }

    /// Gives the lease up so another replica takes over at once, not after it expires.
    async fn release(self) {
        drop(self.leading);
        match self.handle.await {
            Ok(Ok(_)) => tracing::info!("released the leader lease"),
            Ok(Err(e)) => tracing::warn!(error = %e, "could not release the leader lease"),
            Err(e) => tracing::warn!(error = %e, "lease manager task failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;
    use crate::controller::Owner;

    fn pod(name: &str, owner: &str) -> CachedPod {
        let mut pod = ObservedPod::default();
        pod.metadata.name = Some(name.into());
        pod.metadata.namespace = Some("ns".into());
        pod.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "kubeflow.org/v1".into(),
            kind: "TFJob".into(),
            name: owner.into(),
            uid: format!("uid-{owner}"),
            controller: Some(true),
            ..OwnerReference::default()
        }]);
        pod.into()
    }

    /// A child changed and deleted before the controller looks (one burst on the watch), then
    /// another child changed: every one of them reaches the controller, in order. kube-runtime's
    /// shared-store handle lost the deleted child's event and then every later one (#11).
    #[tokio::test]
    async fn a_burst_with_deletions_loses_no_trigger() {
        let router = Router::default();
        let mut triggers = router.subscribe("kubeflow.org/v1", "TFJob");
        let events = futures::stream::iter([
            Ok(watcher::Event::Apply(pod("a-worker-0", "a"))),
            Ok(watcher::Event::Delete(pod("a-worker-0", "a"))),
            Ok(watcher::Event::Apply(pod("b-worker-0", "b"))),
        ]);
        let (store, writer) = reflector::store::<CachedPod>();
        let children = Children::new(store.clone(), ());
        route_children(events, writer, children.clone(), Arc::new(router)).await;
        assert_eq!(children.of("uid-b").len(), 1, "the index follows the watch");
        assert!(children.of("uid-a").is_empty());
        let owner = |name: &str| Owner {
            namespace: Some("ns".into()),
            name: name.into(),
        };
        let got: Vec<(Owner, bool)> = triggers
            .by_ref()
            .take(3)
            .map(|t| (t.owner, t.failure))
            .collect()
            .await;
        assert_eq!(
            got,
            [(owner("a"), false), (owner("a"), true), (owner("b"), false)],
            "a deleted pod is answered at once"
        );
        assert_eq!(store.state().len(), 1, "the cache holds what the watch left");
    }
}
