//! Kubeflow's label keys and child names, and the owner reference every child carries.
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

pub const OPERATOR_NAME: &str = "training.kubeflow.org/operator-name";
pub const JOB_NAME: &str = "training.kubeflow.org/job-name";
pub const REPLICA_TYPE: &str = "training.kubeflow.org/replica-type";
pub const REPLICA_INDEX: &str = "training.kubeflow.org/replica-index";
pub const JOB_ROLE: &str = "training.kubeflow.org/job-role";

/// `<job>-<role lower-case>-<index>`, with `/` replaced by `-` (Kubeflow's `GenGeneralName`).
pub fn child_name(job: &str, role: &str, index: i32) -> String {
    format!("{job}-{}-{index}", role.to_lowercase()).replace('/', "-")
}

/// The labels every child of a job carries (Kubeflow's `GenLabels`).
pub fn job_labels(controller_name: &str, job: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (OPERATOR_NAME.to_owned(), controller_name.to_owned()),
        (JOB_NAME.to_owned(), job.replace('/', "-")),
    ])
}

/// Job labels plus replica type and index: the selector of one replica's service.
pub fn replica_labels(controller_name: &str, job: &str, role: &str, index: i32) -> BTreeMap<String, String> {
    let mut labels = job_labels(controller_name, job);
    labels.insert(REPLICA_TYPE.to_owned(), role.to_lowercase());
    labels.insert(REPLICA_INDEX.to_owned(), index.to_string());
    labels
}

/// The string form of a label selector, sorted by key (`a=b,c=d`).
pub fn selector_string(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The controller owner reference every child carries.
pub fn owner_reference<J: kube::Resource>(job: &J, job_type: &J::DynamicType) -> OwnerReference {
    OwnerReference {
        api_version: J::api_version(job_type).into_owned(),
        kind: J::kind(job_type).into_owned(),
        name: kube::ResourceExt::name_any(job),
        uid: kube::ResourceExt::uid(job).unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_lower_case_role_and_index() {
        assert_eq!(child_name("test-job", "Master", 0), "test-job-master-0");
        assert_eq!(child_name("a/b", "PS", 3), "a-b-ps-3");
    }

    #[test]
    fn replica_labels_are_kubeflows() {
        let labels = replica_labels("pytorchjob-controller", "j", "Worker", 1);
        assert_eq!(
            selector_string(&labels),
            "training.kubeflow.org/job-name=j,training.kubeflow.org/operator-name=pytorchjob-controller,\
             training.kubeflow.org/replica-index=1,training.kubeflow.org/replica-type=worker"
        );
    }
}
