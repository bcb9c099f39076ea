//! A shared cache of one child kind with an index by controlling owner, kept beside
//! kube-runtime's store (which has no secondary index) and updated from the same watch, so a
//! reconcile reads its own job's children instead of scanning every cached object.
use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use kube::api::DynamicObject;
use kube::runtime::reflector::{Lookup, ObjectRef, Store};
use kube::runtime::watcher;

use crate::relist::{Settled, key};

/// The object controlling a cached child, as the child's controller owner reference names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControllerRef<'a> {
    /// The child's namespace, which is its controller's.
    pub namespace: Option<&'a str>,
    pub api_version: &'a str,
    pub kind: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
}

/// An object as a child cache keeps it, and the object a reconcile reads ([`Cached::Full`]).
pub trait Cached: Lookup + Clone + Send + Sync + 'static
where
    Self::DynamicType: Eq + Hash + Clone,
{
    type Full;

    /// The object controlling this one, if any.
    fn controller(&self) -> Option<ControllerRef<'_>>;

    /// The object as a reconcile reads it.
    fn expand(this: &Arc<Self>) -> Arc<Self::Full>;

    /// Whether `newer`, a later version of this object, shows a plan nothing this one did not:
    /// its watch event is then no reason to reconcile the owner. Objects cached whole count
    /// every change.
    fn plans_alike(&self, newer: &Self) -> bool {
        let _ = newer;
        false
    }

    /// Whether this change (`gone`: the object was deleted) is one its owner must answer at once
    /// rather than in the next batch of child changes: a pod that failed or is going away.
    fn answer_at_once(&self, gone: bool) -> bool {
        let _ = gone;
        false
    }
}

/// Owned objects of other kinds (ConfigMaps, Jobs, PodGroups, ...) are few and cached whole.
impl Cached for DynamicObject {
    type Full = Self;

    fn controller(&self) -> Option<ControllerRef<'_>> {
        let owner = self
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))?;
        Some(ControllerRef {
            namespace: self.metadata.namespace.as_deref(),
            api_version: &owner.api_version,
            kind: &owner.kind,
            name: &owner.name,
            uid: &owner.uid,
        })
    }

    fn expand(this: &Arc<Self>) -> Arc<Self> {
        this.clone()
    }
}

/// An object's identity within one watch.
type Key = (Option<String>, String);

/// Children by the UID of the object controlling them, and each child's controller. A child is
/// held as the store's own `Arc` (a pointer, not a copy), so a reconcile reads its children
/// without a lookup in the store's map of every cached object, which misses the CPU caches more
/// as the cluster grows (at 40,000 pods: 21% less per lookup, `benches/children.rs`). An owner's
/// children are a plain list of those pointers, read in one or two cache lines; a child leaves
/// it by a scan comparing pointers, which reads no child.
struct Index<C> {
    by_owner: HashMap<String, Vec<Arc<C>>>,
    /// Each child's owner and the pointer its owner's list holds.
    owner_of: HashMap<Key, (String, Arc<C>)>,
}

impl<C> Default for Index<C> {
    fn default() -> Self {
        Self {
            by_owner: HashMap::new(),
            owner_of: HashMap::new(),
        }
    }
}

impl<C> Index<C> {
    fn unlink(&mut self, key: &Key) {
        if let Some((owner, child)) = self.owner_of.remove(key)
            && let Some(children) = self.by_owner.get_mut(&owner)
        {
            if let Some(at) = children.iter().position(|c| Arc::ptr_eq(c, &child)) {
                children.swap_remove(at);
            }
            if children.is_empty() {
                self.by_owner.remove(&owner);
            }
        }
    }
}

/// The cache of a child kind: kube-runtime's store and the owner index beside it.
pub struct Children<C: Cached>
where
    C::DynamicType: Eq + Hash + Clone,
{
    store: Store<C>,
    dyntype: C::DynamicType,
    index: Arc<RwLock<Index<C>>>,
    /// Whether a reconcile has asked for this cache; its watch starts then. Kinds only some jobs
    /// own (an MPIJob's Secrets, Roles, ...) then cost no watch while no such job exists.
    wanted: Arc<tokio::sync::watch::Sender<bool>>,
    /// Whether the store has listed once. Not `Store::wait_until_ready` for every reconcile:
    /// its oneshot keeps one waker, so of several tasks waiting at once only the last wakes.
    listed: Arc<tokio::sync::watch::Sender<bool>>,
    /// Which watch events tell an owner's reconcile nothing new ([`Children::note`]).
    news: Arc<Mutex<News>>,
}

/// Watch events that change nothing a plan reads: the echo of a create this process made (the
/// reconcile that made it already plans with the object as the create returned it), and a
/// change of what the cache drops (a pod's binding, its resourceVersion).
#[derive(Debug, Default)]
struct News {
    /// Creates of this process in flight (`None`) or done (the resourceVersion they returned),
    /// until their watch event comes.
    created: HashMap<Key, Option<Box<str>>>,
    /// Objects whose event being applied now is not news.
    quiet: HashSet<Key>,
}

/// How long a reconcile waits for a cache to list its objects before it fails and is retried
/// (an API server that is down, a manager that is stopping).
const SYNC_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// A cache's watch had not listed its objects in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the cache's watch has not listed its objects within {}s; retrying", SYNC_WAIT.as_secs())]
pub struct NotSynced;

impl<C: Cached> Clone for Children<C>
where
    C::DynamicType: Eq + Hash + Clone,
{
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            dyntype: self.dyntype.clone(),
            index: self.index.clone(),
            wanted: self.wanted.clone(),
            listed: self.listed.clone(),
            news: self.news.clone(),
        }
    }
}

impl<C: Cached> std::fmt::Debug for Children<C>
where
    C::DynamicType: Eq + Hash + Clone,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let index = self.index.read().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Children")
            .field("owners", &index.by_owner.len())
            .finish()
    }
}

impl<C: Cached> Children<C>
where
    C::DynamicType: Eq + Hash + Clone,
{
    /// The cache over `store`, whose objects are of `dyntype`; empty until [`Children::record`]
    /// sees the watch's objects. Its watch is wanted from the start.
    pub fn new(store: Store<C>, dyntype: C::DynamicType) -> Self {
        let cache = Self::on_demand(store, dyntype);
        cache.wanted.send_replace(true);
        cache
    }

    /// As [`Children::new`], but its watch waits ([`Children::wanted`]) until a reconcile first
    /// asks for the cache ([`Children::synced`]).
    pub fn on_demand(store: Store<C>, dyntype: C::DynamicType) -> Self {
        Self {
            store,
            dyntype,
            index: Arc::default(),
            wanted: Arc::new(tokio::sync::watch::channel(false).0),
            listed: Arc::new(tokio::sync::watch::channel(false).0),
            news: Arc::default(),
        }
    }

    /// Tells [`Children::synced`] when the store has listed: the one task waiting on the store
    /// itself, run beside the watch that fills it.
    pub async fn follow_store(&self) {
        if self.store.wait_until_ready().await.is_ok() {
            self.listed.send_replace(true);
        }
    }

    /// Resolves once the cache is wanted: at once for [`Children::new`], at the first
    /// [`Children::synced`] for [`Children::on_demand`].
    pub async fn wanted(&self) {
        let mut wanted = self.wanted.subscribe();
        // The sender lives in `self`, so it cannot be dropped while this waits.
        let _ = wanted.wait_for(|w| *w).await;
    }

    /// Asks for the cache and waits until its watch has listed every object once, so a
    /// reconcile never plans from a cache that has not seen what exists.
    pub async fn synced(&self) -> Result<(), NotSynced> {
        self.wanted
            .send_if_modified(|wanted| !std::mem::replace(wanted, true));
        let mut listed = self.listed.subscribe();
        match tokio::time::timeout(SYNC_WAIT, listed.wait_for(|l| *l)).await {
            Ok(Ok(_)) => Ok(()),
            // The sender lives in `self`: only the timeout fails.
            _ => Err(NotSynced),
        }
    }

    /// Whether the cache has been asked for and has listed, without waiting.
    pub fn is_synced(&self) -> bool {
        *self.wanted.borrow() && *self.listed.borrow()
    }

    /// Notes a create of this process about to be sent: its watch event may come before the
    /// create returns.
    pub fn creating(&self, namespace: Option<&str>, name: &str) {
        self.set_created(namespace, name, Some(None));
    }

    /// Notes how a create of [`Children::creating`] ended: the resourceVersion of the object it
    /// stored, or none (it failed, or found the object there already: its events are news).
    pub fn created(&self, namespace: Option<&str>, name: &str, resource_version: Option<&str>) {
        self.set_created(namespace, name, resource_version.map(|rv| Some(rv.into())));
    }

    fn set_created(&self, namespace: Option<&str>, name: &str, state: Option<Option<Box<str>>>) {
        let key = (namespace.map(str::to_owned), name.to_owned());
        let mut news = self.news.lock().unwrap_or_else(PoisonError::into_inner);
        match state {
            // Its event came first (and was taken): nothing is left to wait for.
            Some(Some(_)) if !news.created.contains_key(&key) => {}
            Some(state) => {
                news.created.insert(key, state);
            }
            None => {
                news.created.remove(&key);
            }
        }
    }

    /// Looks at a watch event before the store applies it: whether the object it brings tells a
    /// plan anything the cached version (or our own create) did not.
    pub fn note(&self, event: &watcher::Event<C>) {
        let watcher::Event::Apply(object) = event else {
            return;
        };
        let key = key(object);
        let mut cached = ObjectRef::new_with(&key.1, self.dyntype.clone());
        cached.namespace.clone_from(&key.0);
        let mut news = self.news.lock().unwrap_or_else(PoisonError::into_inner);
        let created = news.created.remove(&key);
        let quiet = match self.store.get(&cached) {
            Some(before) => before.plans_alike(object),
            // The first version of an object this process is creating, or created.
            None => created
                .is_some_and(|rv| rv.is_none_or(|rv| object.resource_version().as_deref() == Some(&*rv))),
        };
        if quiet {
            news.quiet.insert(key);
        } else {
            news.quiet.remove(&key);
        }
    }

    /// Updates the index with an object the store already holds (or no longer holds); whether
    /// the change is news to its owner's plan ([`Children::note`]).
    pub fn record(&self, child: &Settled<C>) -> bool {
        let key = key(child.object());
        let quiet = {
            let mut news = self.news.lock().unwrap_or_else(PoisonError::into_inner);
            if matches!(child, Settled::Gone(_)) {
                news.created.remove(&key);
            }
            news.quiet.remove(&key) && matches!(child, Settled::Present(_))
        };
        let mut index = self.index.write().unwrap_or_else(PoisonError::into_inner);
        index.unlink(&key);
        let Settled::Present(object) = child else {
            return true;
        };
        if let Some(owner) = object.controller() {
            let mut cached = ObjectRef::new_with(&key.1, self.dyntype.clone());
            cached.namespace.clone_from(&key.0);
            let stored = self
                .store
                .get(&cached)
                .unwrap_or_else(|| Arc::new(object.clone()));
            index
                .by_owner
                .entry(owner.uid.to_owned())
                .or_default()
                .push(stored.clone());
            index.owner_of.insert(key, (owner.uid.to_owned(), stored));
        }
        !quiet
    }

    /// The cached objects controlled by the object with `owner_uid`, as reconciles read them.
    pub fn of(&self, owner_uid: &str) -> Vec<Arc<C::Full>> {
        let index = self.index.read().unwrap_or_else(PoisonError::into_inner);
        let Some(children) = index.by_owner.get(owner_uid) else {
            return Vec::new();
        };
        // Each was filed under its own controller when recorded: no other owner's child is here.
        children.iter().map(C::expand).collect()
    }

    /// How many owners the index holds children for (for memory checks in tests).
    pub fn owners(&self) -> usize {
        self.index
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .by_owner
            .len()
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;
    use serde_json::json;

    use super::*;
    use crate::child_view::ObservedPod;
    use crate::compact::CachedPod;

    fn pod(name: &str, owner: &str) -> CachedPod {
        CachedPod::from(serde_json::from_value::<ObservedPod>(json!({ "metadata": { "name": name, "namespace": "ns",
            "ownerReferences": [{ "apiVersion": "v1", "kind": "J", "name": "j", "uid": owner, "controller": true }] } }))
        .unwrap())
    }

    #[test]
    fn children_follow_their_owner_through_changes_and_deletes() {
        let (store, mut writer) = reflector::store::<CachedPod>();
        let children = Children::new(store, ());
        let apply = |writer: &mut reflector::store::Writer<CachedPod>, p: CachedPod| {
            writer.apply_watcher_event(&Event::Apply(p.clone()));
            children.record(&Settled::Present(p));
        };
        apply(&mut writer, pod("a-0", "a"));
        apply(&mut writer, pod("a-1", "a"));
        apply(&mut writer, pod("b-0", "b"));
        let names = |owner: &str| {
            let mut n: Vec<String> = children
                .of(owner)
                .iter()
                .map(|p| p.metadata.name.clone().unwrap())
                .collect();
            n.sort();
            n
        };
        assert_eq!(names("a"), ["a-0", "a-1"]);
        assert_eq!(names("b"), ["b-0"]);
        // A new version of a child replaces the one its owner held.
        apply(&mut writer, pod("a-0", "a"));
        assert_eq!(names("a"), ["a-0", "a-1"]);
        // A pod adopted by another owner moves; a deleted one goes, and so does an empty owner.
        apply(&mut writer, pod("a-1", "b"));
        assert_eq!(names("a"), ["a-0"]);
        assert_eq!(names("b"), ["a-1", "b-0"]);
        let gone = pod("a-0", "a");
        writer.apply_watcher_event(&Event::Delete(gone.clone()));
        children.record(&Settled::Gone(gone));
        assert!(names("a").is_empty());
        assert_eq!(children.owners(), 1);
        assert!(children.of("nobody").is_empty());
    }

    /// `name` of owner `a` at resourceVersion `rv`, in `phase`, with `conditions`.
    fn pod_at(name: &str, rv: &str, phase: &str, conditions: serde_json::Value) -> CachedPod {
        CachedPod::from(
            serde_json::from_value::<ObservedPod>(json!({
                "metadata": { "name": name, "namespace": "ns", "resourceVersion": rv,
                    "ownerReferences": [{ "apiVersion": "v1", "kind": "J", "name": "j", "uid": "a", "controller": true }] },
                "status": { "phase": phase, "conditions": conditions },
            }))
            .unwrap(),
        )
    }

    #[test]
    fn only_changes_a_plan_reads_are_news() {
        let (store, mut writer) = reflector::store::<CachedPod>();
        let children = Children::new(store, ());
        let mut news = |p: CachedPod| {
            let event = Event::Apply(p.clone());
            children.note(&event);
            writer.apply_watcher_event(&event);
            children.record(&Settled::Present(p))
        };
        // Our own creates: in flight when the event comes, or returned with its version.
        children.creating(Some("ns"), "p-0");
        assert!(
            !news(pod_at("p-0", "1", "Pending", json!([]))),
            "echo of a create in flight"
        );
        children.created(Some("ns"), "p-0", Some("1"));
        children.creating(Some("ns"), "p-1");
        children.created(Some("ns"), "p-1", Some("2"));
        assert!(
            !news(pod_at("p-1", "2", "Pending", json!([]))),
            "echo of a create"
        );
        assert!(
            news(pod_at("p-2", "3", "Pending", json!([]))),
            "someone else's pod"
        );
        children.creating(Some("ns"), "p-3");
        children.created(Some("ns"), "p-3", None);
        assert!(
            news(pod_at("p-3", "4", "Pending", json!([]))),
            "a create that failed or found one"
        );
        // A binding changes only what the cache drops.
        let scheduled = json!([{ "type": "PodScheduled", "status": "True" }]);
        assert!(!news(pod_at("p-0", "5", "Pending", scheduled.clone())), "bound");
        assert!(news(pod_at("p-0", "6", "Running", scheduled)), "running");
        let gone = pod_at("p-0", "7", "Running", json!([]));
        writer.apply_watcher_event(&Event::Delete(gone.clone()));
        assert!(children.record(&Settled::Gone(gone)), "a deletion is always news");
        assert!(
            children.news.lock().unwrap().created.is_empty(),
            "nothing left waiting"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_on_demand_cache_starts_at_its_first_use_and_waits_for_the_list() {
        use futures::FutureExt;

        let (store, mut writer) = reflector::store::<CachedPod>();
        let children = Children::on_demand(store, ());
        let follow = tokio::spawn({
            let children = children.clone();
            async move { children.follow_store().await }
        });
        assert!(
            children.wanted().now_or_never().is_none(),
            "nobody asked for it yet"
        );
        assert!(!children.is_synced());

        // Several reconciles wait at once, and every one of them wakes.
        let waiting: Vec<_> = (0..4)
            .map(|_| {
                let children = children.clone();
                tokio::spawn(async move { children.synced().await })
            })
            .collect();
        tokio::task::yield_now().await;
        assert!(children.wanted().now_or_never().is_some(), "asked for now");
        assert!(!children.is_synced(), "not listed yet");
        writer.apply_watcher_event(&Event::InitDone);
        follow.await.unwrap();
        for waiter in waiting {
            assert_eq!(waiter.await.unwrap(), Ok(()));
        }
        assert!(children.is_synced());

        // A cache wanted from the start whose watch never lists fails the wait, and is retried.
        let (store, _writer) = reflector::store::<CachedPod>();
        let eager = Children::new(store, ());
        assert!(eager.wanted().now_or_never().is_some());
        assert_eq!(eager.synced().await, Err(NotSynced));
    }
}
