//! Driving one side through a case: create the job, act each step as a user or a kubelet would
//! (kwok annotations on pods, spec patches, deletion), then wait for the side to settle and take
//! its snapshot.
//!
//! Settled means the snapshot stayed the same for [`STABLE`] and the step's expectation (pods
//! running, a condition, the job gone) holds. An expectation a side never meets is not an error:
//! after [`EXPECT_TIMEOUT`] the snapshot is taken as it is, with a note, and the difference
//! shows in the diff.
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kfop_testenv::pods;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::cases::{Case, Exit, Step, targets};
use crate::snapshot::{self, Depth};
// The runner names the side it drives `drive::Side`.
pub use crate::side::Side;
use crate::{Error, Result};

/// How long a snapshot must stay unchanged to count as settled.
pub const STABLE: Duration = Duration::from_millis(1200);
/// How often a settling side is read.
const POLL: Duration = Duration::from_millis(300);
/// How long to wait for a step's expectation (or for a pod to act on) before moving on.
pub const EXPECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long to wait for a snapshot to stop changing at all.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The annotation [`Step::Poke`] changes; its value counts the pokes, the same on both sides.
const POKE_ANNOTATION: &str = "conformance.kfop.dev/poke";

/// A side's snapshot after a step, and what did not go as scripted.
#[derive(Debug, Clone)]
pub struct Settled {
    pub snapshot: Value,
    pub notes: Vec<String>,
}

impl Side {
    fn jobs(&self, case: &Case) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.namespace, &case.kind.resource())
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Creates the claims the job mounts, each pre-bound to a volume of its own (binding takes
    /// the volume controller seconds: the runner asks early, for every case).
    pub async fn provide_claims(&self, case: &Case) -> Result<()> {
        for claim in case.claims() {
            self.provide_claim(&claim).await?;
        }
        Ok(())
    }

    /// Provides the job's claims and waits until they are bound: a pod whose claim is not bound
    /// yet is unschedulable for a moment, which Kubeflow reports as an event.
    pub async fn prepare(&self, case: &Case) -> Result<()> {
        self.provide_claims(case).await?;
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &self.namespace);
        for claim in case.claims() {
            kfop_testenv::wait::until(&format!("claim {claim} bound"), EXPECT_TIMEOUT, || async {
                let pvc = claims
                    .get(&claim)
                    .await
                    .map_err(|e| kfop_testenv::Error::Startup(format!("reading claim {claim}: {e}")))?;
                let phase = pvc.status.and_then(|s| s.phase);
                Ok((phase.as_deref() == Some("Bound")).then_some(()))
            })
            .await?;
        }
        Ok(())
    }

    /// Creates the job.
    pub async fn create(&self, case: &Case) -> Result<()> {
        let mut job: DynamicObject = serde_json::from_value(case.job.clone()).map_err(|e| Error::Case {
            case: case.name.clone(),
            message: format!("job object: {e}"),
        })?;
        job.metadata.namespace = Some(self.namespace.clone());
        self.jobs(case)
            .create(&PostParams::default(), &job)
            .await
            .map_err(Error::kube(format!(
                "creating {} {} in {}",
                case.kind.kind, case.name, self.namespace
            )))?;
        Ok(())
    }

    /// A PersistentVolumeClaim `claim` pre-bound to a hostPath volume, so that pods mounting it
    /// schedule (as the examples' own `pvc.yaml` would have them). Kept if it exists: cases share.
    async fn provide_claim(&self, claim: &str) -> Result<()> {
        let volume = format!("{}-{claim}", self.namespace);
        let pv: PersistentVolume = from_json(json!({
            "metadata": { "name": volume },
            "spec": {
                "capacity": { "storage": "10Gi" },
                "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
                "hostPath": { "path": format!("/tmp/kfop-conformance/{volume}") },
                "storageClassName": "",
                "claimRef": { "namespace": self.namespace, "name": claim },
            },
        }))?;
        let pvc: PersistentVolumeClaim = from_json(json!({
            "metadata": { "name": claim },
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "resources": { "requests": { "storage": "10Gi" } },
                "storageClassName": "",
                "volumeName": volume,
            },
        }))?;
        created(
            Api::<PersistentVolume>::all(self.client.clone())
                .create(&PostParams::default(), &pv)
                .await,
            format!("creating volume {volume}"),
        )?;
        created(
            Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), &self.namespace)
                .create(&PostParams::default(), &pvc)
                .await,
            format!("creating claim {claim}"),
        )
    }

    /// Acts `step` (nothing for the waiting steps); returns notes on what could not be done.
    pub async fn act(&self, case: &Case, step: &Step) -> Result<Vec<String>> {
        match step {
            Step::Settle | Step::Running | Step::Finished => Ok(Vec::new()),
            Step::Exit(exit) => self.exit(case, exit).await,
            Step::Evict(evict) => self.evict(case, &evict.pods).await,
            Step::RestartCount(r) => {
                let name = format!("{}-{}", case.name, r.pod);
                match self.running_pod(&name).await? {
                    Some(_) => {
                        pods::set_restart_count(&self.pods(), &name, r.count).await?;
                        Ok(Vec::new())
                    }
                    None => Ok(vec![format!("pod {} was not running", r.pod)]),
                }
            }
            Step::Suspend | Step::Resume => {
                let patch = json!({ "spec": { "runPolicy": { "suspend": *step == Step::Suspend } } });
                self.jobs(case)
                    .patch(&case.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(Error::kube(format!("{step} {}", case.name)))?;
                Ok(Vec::new())
            }
            Step::Wait(w) => {
                tokio::time::sleep(Duration::from_secs(w.seconds)).await;
                Ok(Vec::new())
            }
            Step::Gone => Ok(Vec::new()),
            Step::AdmitPodGroup => self.admit_pod_group(case).await,
            Step::Patch(patch) => {
                // In the kind's own terms: `replicaSpecs` renamed; the API server merges it.
                let mut spec = patch.clone();
                if let Some(map) = spec.as_object_mut()
                    && let Some(roles) = map.remove("replicaSpecs")
                {
                    map.insert(case.kind.specs.to_owned(), roles);
                }
                let body = json!({ "spec": spec });
                self.jobs(case)
                    .patch(&case.name, &PatchParams::default(), &Patch::Merge(&body))
                    .await
                    .map_err(Error::kube(format!("patching {}", case.name)))?;
                Ok(Vec::new())
            }
            Step::Poke => {
                let jobs = self.jobs(case);
                let job = jobs
                    .get(&case.name)
                    .await
                    .map_err(Error::kube(format!("reading {}", case.name)))?;
                let pokes: u64 = job
                    .annotations()
                    .get(POKE_ANNOTATION)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                let patch =
                    json!({ "metadata": { "annotations": { POKE_ANNOTATION: (pokes + 1).to_string() } } });
                jobs.patch(&case.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(Error::kube(format!("annotating {}", case.name)))?;
                Ok(Vec::new())
            }
            Step::Delete => {
                match self
                    .jobs(case)
                    .delete(&case.name, &DeleteParams::background())
                    .await
                {
                    Ok(_) => Ok(Vec::new()),
                    Err(kube::Error::Api(s)) if s.code == 404 => {
                        Ok(vec!["the job was already gone".to_owned()])
                    }
                    Err(e) => Err(Error::kube(format!("deleting {}", case.name))(e)),
                }
            }
        }
    }

    /// Annotates the targeted running pods and waits until kwok has ended each (it turned
    /// Succeeded or Failed, or the operator already replaced or deleted it).
    async fn exit(&self, case: &Case, exit: &Exit) -> Result<Vec<String>> {
        let api = self.pods();
        let prefix = format!("{}-", case.name);
        let by_job = ListParams::default().labels(&format!("training.kubeflow.org/job-name={}", case.name));
        let deadline = Instant::now() + EXPECT_TIMEOUT;
        let mut notes = Vec::new();
        // The pods there are once none is pending (the previous step settled, so a missing pod
        // stays missing).
        let chosen = loop {
            let listed = api
                .list(&by_job)
                .await
                .map_err(Error::kube(format!("listing pods of {}", case.name)))?
                .items;
            let matching: Vec<Pod> = listed
                .into_iter()
                .filter(|p| {
                    let name = p.name_any();
                    targets(&exit.pods, name.strip_prefix(&prefix).unwrap_or(&name))
                })
                .collect();
            let pending = matching.iter().any(|p| matches!(pods::phase(p), "Pending" | ""));
            if !pending || Instant::now() >= deadline {
                let running: Vec<Pod> = matching
                    .into_iter()
                    .filter(|p| pods::phase(p) == "Running" && p.metadata.deletion_timestamp.is_none())
                    .collect();
                let named = exit.pods.iter().filter(|p| !p.contains(['*', '?'])).count();
                if running.len() < named || pending {
                    notes.push(format!(
                        "only {} of the pods {:?} were running",
                        running.len(),
                        exit.pods
                    ));
                }
                break running;
            }
            tokio::time::sleep(POLL).await;
        };
        for pod in &chosen {
            pods::finish(&api, &pod.name_any(), exit.code, exit.restarts).await?;
        }
        for pod in &chosen {
            let (name, uid) = (pod.name_any(), pod.uid());
            let ended = kfop_testenv::wait::until(&format!("pod {name} to end"), EXPECT_TIMEOUT, || async {
                let now = api
                    .get_opt(&name)
                    .await
                    .map_err(|e| kfop_testenv::Error::Startup(format!("reading pod {name}: {e}")))?;
                Ok(match now {
                    Some(p) if p.uid() == uid => {
                        matches!(pods::phase(&p), "Succeeded" | "Failed").then_some(())
                    }
                    _ => Some(()),
                })
            })
            .await;
            if ended.is_err() {
                notes.push(format!("pod {name} did not end"));
            }
        }
        Ok(notes)
    }

    /// Evicts the targeted running pods as the kubelet's eviction manager does: phase Failed,
    /// reason Evicted, every container terminated with exit code 137.
    async fn evict(&self, case: &Case, patterns: &[String]) -> Result<Vec<String>> {
        let api = self.pods();
        let prefix = format!("{}-", case.name);
        let by_job = ListParams::default().labels(&format!("training.kubeflow.org/job-name={}", case.name));
        let pods = api
            .list(&by_job)
            .await
            .map_err(Error::kube(format!("listing pods of {}", case.name)))?
            .items;
        let mut evicted = 0;
        for pod in pods {
            let name = pod.name_any();
            if pods::phase(&pod) != "Running"
                || !targets(patterns, name.strip_prefix(&prefix).unwrap_or(&name))
            {
                continue;
            }
            let containers: Vec<Value> = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .into_iter()
                .flatten()
                .map(|c| {
                    json!({
                        "name": c.name, "image": c.image, "imageID": c.image_id, "ready": false,
                        "restartCount": c.restart_count,
                        "state": { "terminated": { "exitCode": 137, "reason": "Error" } },
                    })
                })
                .collect();
            let status = json!({ "status": {
                "phase": "Failed",
                "reason": "Evicted",
                "message": "The node was low on resource: memory.",
                "containerStatuses": containers,
            }});
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await
                .map_err(Error::kube(format!("evicting pod {name}")))?;
            evicted += 1;
        }
        Ok(if evicted == 0 {
            vec![format!("no running pod matched {patterns:?}")]
        } else {
            Vec::new()
        })
    }

    /// Sets the phase of the job's Volcano PodGroup to Inqueue, as Volcano's scheduler does
    /// once the gang fits, after waiting for the operator to create it.
    async fn admit_pod_group(&self, case: &Case) -> Result<Vec<String>> {
        let groups: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &self.namespace,
            &crate::snapshot::volcano_pod_group(),
        );
        let deadline = Instant::now() + EXPECT_TIMEOUT;
        loop {
            let found = groups
                .get_opt(&case.name)
                .await
                .map_err(Error::kube(format!("reading PodGroup {}", case.name)))?;
            if found.is_some() {
                let patch = json!({ "status": { "phase": "Inqueue" } });
                groups
                    .patch_status(&case.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(Error::kube(format!("admitting PodGroup {}", case.name)))?;
                return Ok(Vec::new());
            }
            if Instant::now() >= deadline {
                return Ok(vec!["no PodGroup to admit".to_owned()]);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The pod `name` once it runs; `None` if it is missing or does not start running.
    async fn running_pod(&self, name: &str) -> Result<Option<Pod>> {
        let api = self.pods();
        let deadline = Instant::now() + EXPECT_TIMEOUT;
        loop {
            let pod = api
                .get_opt(name)
                .await
                .map_err(Error::kube(format!("reading pod {name}")))?;
            match pod {
                Some(pod) if pods::phase(&pod) == "Running" => return Ok(Some(pod)),
                Some(pod) if matches!(pods::phase(&pod), "Pending" | "") && Instant::now() < deadline => {}
                _ => return Ok(None),
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits until the side settles after `step` and returns its full snapshot.
    pub async fn settle(&self, case: &Case, step: &Step) -> Result<Settled> {
        let started = Instant::now();
        let mut notes = Vec::new();
        let mut last: Option<Value> = None;
        let mut since = Instant::now();
        loop {
            let mut light = snapshot::capture(self, case, Depth::Light).await?;
            // Event counts keep growing while Kubeflow re-emits an event on every reconcile.
            if let Some(map) = light.as_object_mut() {
                map.remove(snapshot::META);
            }
            let met = expected(case, step, &light);
            if last.as_ref() != Some(&light) {
                last = Some(light);
                since = Instant::now();
            } else if since.elapsed() >= STABLE && (met || started.elapsed() >= EXPECT_TIMEOUT) {
                if !met {
                    notes.push(format!(
                        "{} not reached in {}s",
                        expectation(step),
                        EXPECT_TIMEOUT.as_secs()
                    ));
                }
                break;
            }
            if started.elapsed() >= SETTLE_TIMEOUT {
                if !met {
                    notes.push(format!("{} not reached", expectation(step)));
                }
                notes.push(format!("still changing after {}s", SETTLE_TIMEOUT.as_secs()));
                break;
            }
            tokio::time::sleep(POLL).await;
        }
        let snapshot = snapshot::capture(self, case, Depth::Full).await?;
        Ok(Settled { snapshot, notes })
    }
}

/// Ok when created or already there.
fn created<T>(result: kube::Result<T>, what: String) -> Result<()> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(Error::kube(what)(e)),
    }
}

fn from_json<T: serde::de::DeserializeOwned>(value: Value) -> Result<T> {
    serde_json::from_value(value).map_err(|e| Error::Build(e.to_string()))
}

/// What `step` waits for, in words.
fn expectation(step: &Step) -> &'static str {
    match step {
        Step::Running => "every replica's pod Running",
        Step::Settle => "Created",
        Step::Finished => "Succeeded or Failed",
        Step::Suspend => "Suspended",
        Step::Resume => "not Suspended",
        Step::Delete | Step::Gone => "the job and its pods gone",
        _ => "nothing",
    }
}

/// Whether the snapshot shows what `step` waits for.
fn expected(case: &Case, step: &Step, snapshot: &Value) -> bool {
    let condition = |kind: &str| snapshot["job"]["status"]["conditions"][kind]["status"] == "True";
    let gone = snapshot["job"].is_null();
    match step {
        // The pods of the spec as the side has it now (a patch may have scaled it).
        Step::Running => {
            let mut now = case.clone();
            if snapshot["job"]["spec"].is_object() {
                now.job["spec"] = snapshot["job"]["spec"].clone();
            }
            // mpi-operator sets Running from the launcher Job's status, which the Job controller
            // writes up to a second after the pod runs: wait for the condition too.
            now.expected_pods()
                .iter()
                .all(|p| snapshot["pods"][p]["phase"] == "Running")
                && (case.kind.batch_role.is_none() || condition("Running"))
        }
        // At least one pass of the operator: a loaded peer may not have seen the job yet.
        Step::Settle => gone || condition("Created"),
        Step::Finished => gone || condition("Succeeded") || condition("Failed"),
        // The launcher's end is the job's (through the batch Job's own status first): wait for
        // the operator to finish the job, not only for the pod to end.
        // ... and for it to delete the pods its cleanPodPolicy (Running or All) names, which
        // mpi-operator does on the pass after the one that wrote Succeeded.
        Step::Exit(exit) if ends_batch_role(case, exit) => {
            let policy = &case.job["spec"]["runPolicy"]["cleanPodPolicy"];
            let cleans = policy == "Running" || policy == "All";
            let running = snapshot["pods"]
                .as_object()
                .is_some_and(|pods| pods.values().any(|p| p["phase"] == "Running"));
            gone || ((condition("Succeeded") || condition("Failed")) && !(cleans && running))
        }
        // mpi-operator reports from the launcher Job and the pods it sees on later syncs, a
        // moment after the condition: for MPIJob wait until the pods are gone (suspend) or run
        // again with the job Running (resume).
        Step::Suspend => {
            condition("Suspended")
                && (case.kind.batch_role.is_none()
                    || snapshot["pods"].as_object().is_none_or(|p| p.is_empty()))
        }
        // Pods may wait for a gang (a later `running` step waits for them).
        Step::Resume => {
            !condition("Suspended")
                && (case.kind.batch_role.is_none() || expected(case, &Step::Running, snapshot))
        }
        Step::Delete | Step::Gone => {
            gone && snapshot["pods"].as_object().is_none_or(|p| p.is_empty())
                && snapshot["services"].as_object().is_none_or(|s| s.is_empty())
        }
        _ => true,
    }
}

/// Whether `exit` ends the pod of the kind's batch role (MPIJob's `launcher-*`).
fn ends_batch_role(case: &Case, exit: &Exit) -> bool {
    case.kind.batch_role.is_some_and(|role| {
        let prefix = format!("{}-", role.to_ascii_lowercase());
        exit.pods.iter().any(|p| p.starts_with(&prefix))
    })
}
