//! The fewest arguments: plural and category take their defaults, there is no scale
//! subresource, and one attribute-level restart policy serves every role.
use kfop_runtime::TrainingJob;
use kfop_runtime::api::{ReplicaSpec, RestartPolicy, RunPolicy};
use kfop_runtime::kube::CustomResourceExt;

#[kfop_runtime::training_job(
    group = "example.com",
    version = "v1alpha1",
    kind = "FooJob",
    controller = "foojob-controller",
    framework = "foo",
    container = "foo",
    port_name = "foojob-port",
    port = 7777,
    restart_policy = "Never",
    role(name = "Worker")
)]
pub struct FooJobSpec {
    pub run_policy: RunPolicy,
    #[kfop(replica_specs)]
    pub replica_specs: std::collections::BTreeMap<String, ReplicaSpec>,
}

fn main() {
    let crd = FooJob::crd();
    assert_eq!(crd.spec.names.plural, "foojobs");
    assert_eq!(crd.spec.names.categories, Some(vec!["kubeflow".to_owned()]));
    assert_eq!(crd.spec.names.short_names, None);
    let subresources = crd.spec.versions[0].subresources.clone().unwrap();
    assert!(subresources.scale.is_none());
    assert!(subresources.status.is_some());
    let roles = &FooJob::framework_info().roles;
    assert_eq!(roles.len(), 1);
    assert_eq!(roles[0].default_restart_policy, RestartPolicy::Never);
    assert_eq!(FooJobReplicaType::ALL, [FooJobReplicaType::Worker]);
}
