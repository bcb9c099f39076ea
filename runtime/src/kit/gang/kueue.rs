//! Kueue pod groups (pure): a job's pods queued as one Kueue pod group, through Kueue's "pod"
//! integration, which Kueue keeps when it drops its Kubeflow job integrations.
//!
//! The protocol, as Kueue's `pkg/controller/jobs/pod` reads it: every pod of the group carries
//! the label `kueue.x-k8s.io/queue-name` (its LocalQueue), the label
//! `kueue.x-k8s.io/pod-group-name` (the group, which is also the name of the Workload Kueue
//! makes for it) and the annotation `kueue.x-k8s.io/pod-group-total-count` (how many pods the
//! group has). Kueue's pod webhook gates each new pod (`kueue.x-k8s.io/admission`); once all of
//! them exist it creates the group's Workload, one PodSet per `kueue.x-k8s.io/role-hash`, and
//! when the Workload is admitted it removes the gates and merges the flavors' node selectors and
//! tolerations into the pods. A preempted group's pods are deleted by Kueue; the job's
//! controller creates them again (gated), and they run once the Workload is admitted again.
//!
//! kfop sets the role hash itself (the lower-cased role), so the Workload's PodSets are named
//! after the job's roles, and points Kueue's topology-aware scheduling at the replica index for
//! rank order (`kueue.x-k8s.io/pod-group-pod-index-label`).
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use kube::api::DynamicObject;

use crate::labels::REPLICA_INDEX;

/// The LocalQueue label Kueue reads on jobs and pods.
pub const QUEUE_NAME_LABEL: &str = "kueue.x-k8s.io/queue-name";
/// Kueue's WorkloadPriorityClass label, copied from the job to its pods.
pub const PRIORITY_CLASS_LABEL: &str = "kueue.x-k8s.io/priority-class";
/// The pod group (and Workload) name.
pub const POD_GROUP_NAME_LABEL: &str = "kueue.x-k8s.io/pod-group-name";
/// How many pods the group has.
pub const POD_GROUP_TOTAL_COUNT_ANNOTATION: &str = "kueue.x-k8s.io/pod-group-total-count";
/// The PodSet a pod belongs to (Kueue computes a hash of the pod's shape when it is absent).
pub const ROLE_HASH_ANNOTATION: &str = "kueue.x-k8s.io/role-hash";
/// Names the label topology-aware scheduling orders a PodSet's pods by.
pub const POD_INDEX_LABEL_ANNOTATION: &str = "kueue.x-k8s.io/pod-group-pod-index-label";
/// The scheduling gate Kueue's pod webhook adds and removes on admission.
pub const ADMISSION_GATE: &str = "kueue.x-k8s.io/admission";
/// The finalizer Kueue's pod webhook puts on each pod it manages; Kueue removes it from a
/// group's terminated pod only once a replacement (of another name) exists.
pub const POD_FINALIZER: &str = "kueue.x-k8s.io/managed";
/// `"false"`: the group is finished once none of its pods is active, rather than once all have
/// succeeded.
pub const RETRIABLE_IN_GROUP_ANNOTATION: &str = "kueue.x-k8s.io/retriable-in-group";

/// Kueue's Workload kind (`kueue.x-k8s.io/v1beta2`, served by Kueue v0.15 and later).
pub fn workload_api_resource() -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: "kueue.x-k8s.io".to_owned(),
        version: "v1beta2".to_owned(),
        api_version: "kueue.x-k8s.io/v1beta2".to_owned(),
        kind: "Workload".to_owned(),
        plural: "workloads".to_owned(),
    }
}

/// Kueue's limit on a pod group name: it is a label value.
const MAX_GROUP_NAME: usize = 63;
/// How much of the job's UID the group name carries, so that a job deleted and created again
/// under the same name never joins the old job's Workload while that is being cleaned up.
const UID_SUFFIX: usize = 8;

/// The pod group of one job: what its pods carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KueuePodGroup {
    /// The group's name, also its Workload's.
    pub name: String,
    /// The LocalQueue.
    pub queue: String,
    /// Every pod of the job, of every role (an MPIJob's launcher too).
    pub total_count: i32,
    /// The job's WorkloadPriorityClass, if it names one.
    pub priority_class: Option<String>,
}

/// The pod group of the job `job_name` (UID `job_uid`, labels `job_labels`, `total_count` pods)
/// when pod groups are on and the job names a LocalQueue; `None` otherwise.
pub fn pod_group(
    enabled: bool,
    job_name: &str,
    job_uid: &str,
    job_labels: &BTreeMap<String, String>,
    total_count: i32,
) -> Option<KueuePodGroup> {
    if !enabled {
        return None;
    }
    let queue = job_labels.get(QUEUE_NAME_LABEL).filter(|q| !q.is_empty())?;
    Some(KueuePodGroup {
        name: group_name(job_name, job_uid),
        queue: queue.clone(),
        total_count,
        priority_class: job_labels.get(PRIORITY_CLASS_LABEL).cloned(),
    })
}

/// `<job>-<first 8 characters of its UID>`, the job's name cut so that the whole fits a label
/// value (and a trailing `-` or `.` of the cut dropped).
pub fn group_name(job_name: &str, job_uid: &str) -> String {
    let suffix: String = job_uid
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(UID_SUFFIX)
        .collect::<String>()
        .to_ascii_lowercase();
    if suffix.is_empty() {
        return job_name.chars().take(MAX_GROUP_NAME).collect();
    }
    let room = MAX_GROUP_NAME - suffix.len() - 1;
    let head: String = job_name.chars().take(room).collect();
    let head = head.trim_end_matches(['-', '.']);
    format!("{head}-{suffix}")
}

impl KueuePodGroup {
    /// Marks a pod template of `role` as a member of the group. Labels and annotations the
    /// template sets itself are kept but for the group's own keys.
    pub fn decorate(&self, role: &str, template: &mut PodTemplateSpec) {
        let meta = template.metadata.get_or_insert_with(Default::default);
        let labels = meta.labels.get_or_insert_with(BTreeMap::new);
        labels.insert(QUEUE_NAME_LABEL.to_owned(), self.queue.clone());
        labels.insert(POD_GROUP_NAME_LABEL.to_owned(), self.name.clone());
        if let Some(priority) = &self.priority_class {
            labels.insert(PRIORITY_CLASS_LABEL.to_owned(), priority.clone());
        }
        let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
        annotations.insert(
            POD_GROUP_TOTAL_COUNT_ANNOTATION.to_owned(),
            self.total_count.to_string(),
        );
        annotations.insert(ROLE_HASH_ANNOTATION.to_owned(), role_hash(role));
        annotations
            .entry(POD_INDEX_LABEL_ANNOTATION.to_owned())
            .or_insert_with(|| REPLICA_INDEX.to_owned());
    }
}

/// The PodSet name of a role: lower-case, `/` and other characters a Kubernetes name refuses
/// replaced by `-`.
pub fn role_hash(role: &str) -> String {
    role.to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// The strategic merge patches the pods of a group need (pod name, patch), each naming the pod's
/// UID so that it never reaches a newer pod of the same name:
///
/// * a pod being deleted loses Kueue's finalizer: kfop replaces a pod under the same name, which
///   cannot be created while the old one is held, and Kueue lets go of a group's terminated pod
///   only once its replacement exists (a preempted group's pods, a restarted replica's);
/// * once the job is finished (`finished`), its live pods are marked not retriable, so that the
///   group's Workload finishes (its quota freed) when no pod is active, also when some pods were
///   deleted or failed after the job succeeded (a PyTorchJob's workers, `cleanPodPolicy`).
pub fn pod_patches<'a>(
    finished: bool,
    pods: impl IntoIterator<Item = &'a crate::child_view::ObservedPod>,
) -> Vec<(String, serde_json::Value)> {
    let mut patches = Vec::new();
    for pod in pods {
        let meta = &pod.metadata;
        let Some(name) = meta.name.clone() else {
            continue;
        };
        let held = meta
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|f| f == POD_FINALIZER));
        if meta.deletion_timestamp.is_some() {
            if held {
                patches.push((
                    name,
                    serde_json::json!({ "metadata": {
                        "uid": meta.uid,
                        "$deleteFromPrimitiveList/finalizers": [POD_FINALIZER],
                    }}),
                ));
            }
            continue;
        }
        let marked = meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(RETRIABLE_IN_GROUP_ANNOTATION))
            .is_some_and(|v| v == "false");
        if finished
            && !marked
            && meta
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(POD_GROUP_NAME_LABEL))
        {
            patches.push((
                name,
                serde_json::json!({ "metadata": {
                    "uid": meta.uid,
                    "annotations": { RETRIABLE_IN_GROUP_ANNOTATION: "false" },
                }}),
            ));
        }
    }
    patches
}

/// Where a job's pod group stands in Kueue, read from its Workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Admitted: its pods are (or are being) ungated.
    Admitted,
    /// Not admitted (yet, or no longer), with why as Kueue words it.
    Waiting(String),
}

/// The admission state of the Workload `workload` (the group's, from Kueue's cache); `None`
/// (no Workload yet) means Kueue has not seen all the group's pods yet.
pub fn admission(group: &KueuePodGroup, workload: Option<&DynamicObject>) -> Admission {
    let Some(workload) = workload else {
        return Admission::Waiting(format!(
            "waiting for Kueue to create Workload {} for the pod group",
            group.name
        ));
    };
    let conditions = workload
        .data
        .get("status")
        .and_then(|s| s.get("conditions"))
        .and_then(|c| c.as_array())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let condition = |type_: &str| {
        conditions
            .iter()
            .find(|c| c.get("type").and_then(|t| t.as_str()) == Some(type_))
    };
    let is_true = |type_: &str| {
        condition(type_).is_some_and(|c| c.get("status").and_then(|s| s.as_str()) == Some("True"))
    };
    let message = |type_: &str| {
        condition(type_)
            .and_then(|c| c.get("message"))
            .and_then(|m| m.as_str())
            .filter(|m| !m.is_empty())
            .map(str::to_owned)
    };
    if is_true("Finished") {
        return Admission::Admitted;
    }
    if is_true("Admitted") && !is_true("Evicted") {
        return Admission::Admitted;
    }
    // The most telling message first: why it was evicted, why it has no quota, why it is
    // inadmissible, else just that it waits.
    let why = (is_true("Evicted").then(|| message("Evicted")).flatten())
        .or_else(|| message("QuotaReserved"))
        .or_else(|| message("Admitted"))
        .unwrap_or_else(|| "waiting for quota".to_owned());
    Admission::Waiting(format!("Workload {}: {why}", group.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn group() -> KueuePodGroup {
        pod_group(
            true,
            "job",
            "0123abcd-ffff",
            &labels(&[(QUEUE_NAME_LABEL, "team"), (PRIORITY_CLASS_LABEL, "high")]),
            3,
        )
        .unwrap()
    }

    #[test]
    fn only_a_job_naming_a_queue_with_pod_groups_on_is_a_group() {
        let queued = labels(&[(QUEUE_NAME_LABEL, "team")]);
        assert!(pod_group(false, "j", "u", &queued, 1).is_none());
        assert!(pod_group(true, "j", "u", &BTreeMap::new(), 1).is_none());
        assert!(pod_group(true, "j", "u", &labels(&[(QUEUE_NAME_LABEL, "")]), 1).is_none());
        let g = group();
        assert_eq!(g.name, "job-0123abcd");
        assert_eq!(g.queue, "team");
        assert_eq!(g.total_count, 3);
        assert_eq!(g.priority_class.as_deref(), Some("high"));
    }

    fn observed_pod(json: serde_json::Value) -> crate::child_view::ObservedPod {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn deleted_pods_lose_kueue_s_finalizer_and_a_finished_job_s_pods_are_not_retriable() {
        let group = serde_json::json!({ POD_GROUP_NAME_LABEL: "g" });
        let live = observed_pod(serde_json::json!({"metadata": {
            "name": "live", "uid": "u1", "labels": group, "finalizers": [POD_FINALIZER]}}));
        let deleting = observed_pod(serde_json::json!({"metadata": {
            "name": "deleting", "uid": "u2", "labels": group, "finalizers": ["other", POD_FINALIZER],
            "deletionTimestamp": "2026-12-06T00:00:00Z"}}));
        let let_go = observed_pod(serde_json::json!({"metadata": {
            "name": "let-go", "uid": "u3", "labels": group, "finalizers": ["other"],
            "deletionTimestamp": "2026-12-06T00:00:00Z"}}));
        let marked = observed_pod(serde_json::json!({"metadata": {
            "name": "marked", "uid": "u4", "labels": group,
            "annotations": { RETRIABLE_IN_GROUP_ANNOTATION: "false" }}}));
        let pods = [&live, &deleting, &let_go, &marked];

        let running = pod_patches(false, pods);
        assert_eq!(running.len(), 1);
        assert_eq!(running[0].0, "deleting");
        assert_eq!(
            running[0].1,
            serde_json::json!({"metadata": {"uid": "u2", "$deleteFromPrimitiveList/finalizers": [POD_FINALIZER]}})
        );

        let finished = pod_patches(true, pods);
        let names: Vec<&str> = finished.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["live", "deleting"]);
        assert_eq!(
            finished[0].1,
            serde_json::json!({"metadata": {"uid": "u1", "annotations": {RETRIABLE_IN_GROUP_ANNOTATION: "false"}}})
        );
    }

    #[test]
    fn group_names_fit_a_label_value() {
        let long = "a".repeat(80);
        let name = group_name(&long, "ABCDEF12-3456");
        assert_eq!(name.len(), 63);
        assert!(name.ends_with("-abcdef12"));
        let cut = format!("{}-b", "a".repeat(53));
        assert_eq!(
            group_name(&cut, "12345678"),
            format!("{}-12345678", "a".repeat(53))
        );
        assert_eq!(group_name("j", ""), "j");
    }

    #[test]
    fn decoration_marks_the_pod_and_keeps_the_template_s_own() {
        let mut t: PodTemplateSpec = serde_json::from_value(serde_json::json!({
            "metadata": {
                "labels": {"mine": "1"},
                "annotations": {
                    "kueue.x-k8s.io/podset-required-topology": "rack",
                    POD_INDEX_LABEL_ANNOTATION: "my-index",
                },
            },
            "spec": {"containers": []},
        }))
        .unwrap();
        group().decorate("Worker", &mut t);
        let meta = t.metadata.unwrap();
        let l = meta.labels.unwrap();
        assert_eq!(l[QUEUE_NAME_LABEL], "team");
        assert_eq!(l[POD_GROUP_NAME_LABEL], "job-0123abcd");
        assert_eq!(l[PRIORITY_CLASS_LABEL], "high");
        assert_eq!(l["mine"], "1");
        let a = meta.annotations.unwrap();
        assert_eq!(a[POD_GROUP_TOTAL_COUNT_ANNOTATION], "3");
        assert_eq!(a[ROLE_HASH_ANNOTATION], "worker");
        assert_eq!(a["kueue.x-k8s.io/podset-required-topology"], "rack");
        assert_eq!(a[POD_INDEX_LABEL_ANNOTATION], "my-index");

        let mut t = PodTemplateSpec::default();
        group().decorate("Master", &mut t);
        let a = t.metadata.unwrap().annotations.unwrap();
        assert_eq!(a[POD_INDEX_LABEL_ANNOTATION], REPLICA_INDEX);
        assert_eq!(role_hash("Chief/x"), "chief-x");
    }

    fn workload(conditions: serde_json::Value) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "job-0123abcd", "namespace": "ns"},
            "status": {"conditions": conditions},
        }))
        .unwrap()
    }

    #[test]
    fn admission_reads_the_workload_s_conditions() {
        let g = group();
        assert!(
            matches!(admission(&g, None), Admission::Waiting(m) if m.contains("create Workload job-0123abcd"))
        );
        let w = workload(serde_json::json!([
            {"type": "QuotaReserved", "status": "False", "reason": "Pending",
             "message": "LocalQueue team doesn't exist"},
        ]));
        assert_eq!(
            admission(&g, Some(&w)),
            Admission::Waiting("Workload job-0123abcd: LocalQueue team doesn't exist".to_owned())
        );
        let w = workload(serde_json::json!([
            {"type": "QuotaReserved", "status": "True", "message": "Quota reserved"},
            {"type": "Admitted", "status": "True", "message": "admitted"},
        ]));
        assert_eq!(admission(&g, Some(&w)), Admission::Admitted);
        let w = workload(serde_json::json!([
            {"type": "QuotaReserved", "status": "False", "message": "Pending: insufficient quota"},
            {"type": "Admitted", "status": "False", "message": "no quota"},
            {"type": "Evicted", "status": "True", "message": "Preempted to accommodate a workload"},
        ]));
        assert_eq!(
            admission(&g, Some(&w)),
            Admission::Waiting("Workload job-0123abcd: Preempted to accommodate a workload".to_owned())
        );
        let w = workload(serde_json::json!([]));
        assert_eq!(
            admission(&g, Some(&w)),
            Admission::Waiting("Workload job-0123abcd: waiting for quota".to_owned())
        );
        let w = workload(serde_json::json!([{"type": "Finished", "status": "True"}]));
        assert_eq!(admission(&g, Some(&w)), Admission::Admitted);
    }
}
