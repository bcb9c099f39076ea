//! Watches a phase's namespace and timestamps each job's milestones in a shared [`Timeline`].
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use tokio::task::JoinHandle;

use crate::timeline::{PodProgress, Timeline};

/// The label every operator-created pod carries: the name of its job.
pub const JOB_NAME_LABEL: &str = "training.kubeflow.org/job-name";

/// A phase's clock and timeline, shared by the submitter and the watchers.
#[derive(Debug, Clone)]
pub struct Observed {
    start: Instant,
    timeline: Arc<Mutex<Timeline>>,
}

impl Observed {
    pub fn new(start: Instant, pods_per_job: usize) -> Self {
        Self {
            start,
            timeline: Arc::new(Mutex::new(Timeline::new(pods_per_job))),
        }
    }

    /// Seconds since the phase started.
    pub fn now(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// Runs `f` on the timeline (a poisoned lock only means a watcher panicked; keep its data).
    pub fn with<T>(&self, f: impl FnOnce(&mut Timeline) -> T) -> T {
        let mut timeline = self.timeline.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut timeline)
    }

    pub fn snapshot(&self) -> Timeline {
        self.with(|t| t.clone())
    }

    /// Watches the pods of `namespace` (and, with `jobs`, the jobs) until the handles are aborted.
    pub fn watch(&self, client: &Client, namespace: &str, jobs: Option<&ApiResource>) -> Vec<JoinHandle<()>> {
        let mut handles = Vec::new();
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let config = watcher::Config::default().labels(JOB_NAME_LABEL);
        let observed = self.clone();
        handles.push(tokio::spawn(async move {
            let stream = watcher::watcher(pods, config).default_backoff();
            let mut stream = std::pin::pin!(stream);
            loop {
                match stream.try_next().await {
                    Ok(Some(Event::Apply(pod) | Event::InitApply(pod))) => observed.pod(&pod),
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(error) => tracing::warn!(%error, "pod watch"),
                }
            }
        }));
        if let Some(ar) = jobs {
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, ar);
            let observed = self.clone();
            handles.push(tokio::spawn(async move {
                let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
                let mut stream = std::pin::pin!(stream);
                while let Some(event) = stream.next().await {
                    match event {
                        Ok(Event::Apply(job) | Event::InitApply(job)) => {
                            let at = observed.now();
                            let (done, running) = (succeeded(&job), condition(&job, "Running"));
                            observed.with(|t| t.job_seen(&job.name_any(), done, running, at));
                        }
                        Ok(_) => {}
                        Err(error) => tracing::warn!(%error, "job watch"),
                    }
                }
            }));
        }
        handles
    }

    fn pod(&self, pod: &Pod) {
        let Some(job) = pod.labels().get(JOB_NAME_LABEL).cloned() else {
            return;
        };
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("");
        let at = self.now();
        let name = pod.name_any();
        self.with(|t| t.pod(&job, &name, PodProgress::of_phase(phase), at));
    }

    /// Waits until `done` holds for the timeline, polling every 100 ms; false on timeout.
    pub async fn wait_until(&self, timeout: Duration, what: &str, done: impl Fn(&Timeline) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut last_log = Instant::now();
        loop {
            if self.with(|t| done(t)) {
                return true;
            }
            if Instant::now() >= deadline {
                tracing::warn!(what, "timed out");
                return false;
            }
            if last_log.elapsed() >= Duration::from_secs(10) {
                let (all_pods, running, succeeded) = self.with(|t| {
                    (
                        t.count(|m| m.all_pods),
                        t.count(|m| m.all_running),
                        t.count(|m| m.succeeded),
                    )
                });
                tracing::info!(what, all_pods, running, succeeded, "waiting");
                last_log = Instant::now();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Whether a Kubeflow job has condition Succeeded=True.
pub fn succeeded(job: &DynamicObject) -> bool {
    condition(job, "Succeeded")
}

/// Whether a Kubeflow job has condition `type_` with status True.
pub fn condition(job: &DynamicObject, type_: &str) -> bool {
    job.data
        .pointer("/status/conditions")
        .and_then(|c| c.as_array())
        .is_some_and(|conditions| {
            conditions.iter().any(|c| {
                c.get("type").and_then(|t| t.as_str()) == Some(type_)
                    && c.get("status").and_then(|s| s.as_str()) == Some("True")
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn succeeded_reads_the_condition() {
        let job = |conditions: serde_json::Value| -> DynamicObject {
            serde_json::from_value(json!({
                "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                "metadata": { "name": "j" },
                "status": { "conditions": conditions },
            }))
            .unwrap()
        };
        assert!(succeeded(&job(json!([
            { "type": "Created", "status": "True" },
            { "type": "Succeeded", "status": "True" },
        ]))));
        assert!(!succeeded(&job(json!([{ "type": "Running", "status": "True" }]))));
        assert!(!succeeded(&job(
            json!([{ "type": "Succeeded", "status": "False" }])
        )));
    }
}
