//! Watch events in the order a cache can answer them.
//!
//! After a watch restarts (the API server restarted, a watch expired), kube-runtime's watcher
//! lists everything again as `Init`, one `InitApply` per object, `InitDone`; the reflector's
//! store collects the `InitApply` objects aside and swaps them in only at `InitDone`. A
//! reconcile triggered by an `InitApply` therefore reads the store from before the outage: the
//! job it names may be missing (kube-runtime's controller then drops the trigger) and its pods
//! may show their old phases (a pod that succeeded meanwhile still reads Running), and nothing
//! triggers it again. Here relisted objects are held until `InitDone`, after the store swapped,
//! and objects the new list no longer holds (deleted during the outage) are released too, as
//! their owners must notice.
use std::collections::HashSet;

use futures::{Stream, StreamExt, stream};
use kube::runtime::reflector::{Lookup, Store};
use kube::runtime::watcher::{self, Event};

/// An object of a reflected watch, released once the store holds what it says.
#[derive(Debug, Clone, PartialEq)]
pub enum Settled<K> {
    /// Created or changed, or listed again after a watch restart.
    Present(K),
    /// Deleted, seen on the watch or missing from a new list.
    Gone(K),
}

impl<K> Settled<K> {
    pub fn object(&self) -> &K {
        match self {
            Self::Present(o) | Self::Gone(o) => o,
        }
    }

    pub fn present(self) -> Option<K> {
        match self {
            Self::Present(o) => Some(o),
            Self::Gone(_) => None,
        }
    }
}

/// The objects of `events`, which must already have been applied to the store `reader` reads
/// (`WatchStreamExt::reflect` or `reflector` before this): applied and deleted objects at once,
/// relisted ones together at `InitDone`, followed by the objects the store held before the
/// relist and no longer holds. Watch errors are dropped (the watcher retries with backoff).
pub fn settled<K>(
    events: impl Stream<Item = Result<Event<K>, watcher::Error>>,
    reader: Store<K>,
) -> impl Stream<Item = Settled<K>>
where
    K: Lookup + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    let mut relist = Relist::default();
    events
        .map(move |event| stream::iter(relist.step(event, &reader)))
        .flatten()
}

/// What a relist in progress has seen.
struct Relist<K> {
    listed: Vec<K>,
    /// The store's objects when the relist began, to find what it no longer holds.
    before: Vec<K>,
}

impl<K> Default for Relist<K> {
    fn default() -> Self {
        Self {
            listed: Vec::new(),
            before: Vec::new(),
        }
    }
}

/// An object's identity within one watch: its namespace and name.
pub(crate) fn key<K: Lookup>(object: &K) -> (Option<String>, String) {
    (
        object.namespace().map(std::borrow::Cow::into_owned),
        object
            .name()
            .map(std::borrow::Cow::into_owned)
            .unwrap_or_default(),
    )
}

impl<K> Relist<K>
where
    K: Lookup + Clone,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    fn step(&mut self, event: Result<Event<K>, watcher::Error>, reader: &Store<K>) -> Vec<Settled<K>> {
        match event {
            Ok(Event::Apply(o)) => vec![Settled::Present(o)],
            Ok(Event::Delete(o)) => vec![Settled::Gone(o)],
            Ok(Event::Init) => {
                self.listed.clear();
                // The store still holds the old list here: the writer swaps at InitDone.
                self.before = reader.state().iter().map(|o| (**o).clone()).collect();
                Vec::new()
            }
            Ok(Event::InitApply(o)) => {
                self.listed.push(o);
                Vec::new()
            }
            Ok(Event::InitDone) => {
                let listed: HashSet<(Option<String>, String)> = self.listed.iter().map(key).collect();
                let gone = std::mem::take(&mut self.before)
                    .into_iter()
                    .filter(|o| !listed.contains(&key(o)))
                    .map(Settled::Gone);
                let mut out: Vec<Settled<K>> = std::mem::take(&mut self.listed)
                    .into_iter()
                    .map(Settled::Present)
                    .collect();
                out.extend(gone);
                out
            }
            Err(e) => {
                tracing::debug!(error = %e, object = std::any::type_name::<K>(), "watch error");
                Vec::new()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kube::ResourceExt;
    use kube::runtime::WatchStreamExt;
    use kube::runtime::reflector;

    use super::*;

    fn pod(name: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("ns".to_owned()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    fn names(settled: &[Settled<Pod>]) -> Vec<String> {
        settled
            .iter()
            .map(|s| match s {
                Settled::Present(p) => format!("+{}", p.name_any()),
                Settled::Gone(p) => format!("-{}", p.name_any()),
            })
            .collect()
    }

    /// A relist releases its objects only once the store holds the new list, and names what the
    /// list no longer has.
    #[tokio::test]
    async fn a_relist_settles_at_init_done_with_what_went_missing() {
        let (reader, writer) = reflector::store::<Pod>();
        let events = stream::iter([
            Ok(Event::Apply(pod("a"))),
            Ok(Event::Apply(pod("b"))),
            Err(watcher::Error::NoResourceVersion),
            Ok(Event::Init),
            Ok(Event::InitApply(pod("a"))),
            Ok(Event::InitApply(pod("c"))),
            Ok(Event::InitDone),
            Ok(Event::Delete(pod("a"))),
        ]);
        let store = reader.clone();
        let seen: Vec<(Vec<String>, Vec<String>)> = settled(events.reflect(writer), reader)
            .map(|s| {
                // What the store holds when each object is released.
                let mut held: Vec<String> = store.state().iter().map(|p| p.name_any()).collect();
                held.sort();
                (names(&[s]), held)
            })
            .collect()
            .await;
        let order: Vec<String> = seen.iter().flat_map(|(n, _)| n.clone()).collect();
        assert_eq!(order, ["+a", "+b", "+a", "+c", "-b", "-a"]);
        // The relisted objects come out after the swap: the store holds exactly a and c.
        assert_eq!(seen[2].1, ["a", "c"]);
        assert_eq!(seen[4].1, ["a", "c"]);
    }
}
