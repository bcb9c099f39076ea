//! A shared cache of one child kind with an index by controlling owner, kept beside
//! kube-runtime's store (which has no secondary index) and updated from the same watch, so a
//! reconcile reads its own job's children instead of scanning every cached object.
use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::{Arc, PoisonError, RwLock};

use kube::api::DynamicObject;
use kube::runtime::reflector::{Lookup, ObjectRef, Store};

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

/// Children by the UID of the object controlling them, and each child's controller.
#[derive(Debug, Default)]
struct Index {
    by_owner: HashMap<String, HashSet<Key>>,
    owner_of: HashMap<Key, String>,
}

impl Index {
    fn unlink(&mut self, key: &Key) {
        if let Some(owner) = self.owner_of.remove(key)
            && let Some(children) = self.by_owner.get_mut(&owner)
        {
            children.remove(key);
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
    index: Arc<RwLock<Index>>,
}

impl<C: Cached> Clone for Children<C>
where
    C::DynamicType: Eq + Hash + Clone,
{
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            dyntype: self.dyntype.clone(),
            index: self.index.clone(),
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
    /// sees the watch's objects.
    pub fn new(store: Store<C>, dyntype: C::DynamicType) -> Self {
        Self {
            store,
            dyntype,
            index: Arc::default(),
        }
    }

    pub fn store(&self) -> &Store<C> {
        &self.store
    }

    /// Updates the index with an object the store already holds (or no longer holds).
    pub fn record(&self, child: &Settled<C>) {
        let key = key(child.object());
        let mut index = self.index.write().unwrap_or_else(PoisonError::into_inner);
        index.unlink(&key);
        let Settled::Present(object) = child else {
            return;
        };
        if let Some(owner) = object.controller() {
            index
                .by_owner
                .entry(owner.uid.to_owned())
                .or_default()
                .insert(key.clone());
            index.owner_of.insert(key, owner.uid.to_owned());
        }
    }

    /// The cached objects controlled by the object with `owner_uid`, as reconciles read them.
    pub fn of(&self, owner_uid: &str) -> Vec<Arc<C::Full>> {
        let index = self.index.read().unwrap_or_else(PoisonError::into_inner);
        let Some(keys) = index.by_owner.get(owner_uid) else {
            return Vec::new();
        };
        keys.iter()
            .filter_map(|(namespace, name)| {
                let mut key = ObjectRef::new_with(name, self.dyntype.clone());
                key.namespace.clone_from(namespace);
                self.store.get(&key)
            })
            // The store may hold a newer object under the name that another owner controls.
            .filter(|object| object.controller().is_some_and(|o| o.uid == owner_uid))
            .map(|object| C::expand(&object))
            .collect()
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
    use crate::compact::CachedPod;
    use crate::observed_child::ObservedPod;

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
}
