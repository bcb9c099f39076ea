#[kfop_runtime::training_job(
    group = "kubeflow.org",
    version = "v1",
    kind = "FooJob",
    controller = "foojob-controller",
    framework = "foo",
    container = "foo",
    port = 7777,
    role(name = "Worker", restart_policy = "OnFailure")
)]
pub struct FooJobSpec {
    #[serde(default)]
    pub run_policy: kfop_runtime::api::RunPolicy,
    #[kfop(replica_specs)]
    pub foo_replica_specs: std::collections::BTreeMap<String, kfop_runtime::api::ReplicaSpec>,
}

fn main() {}
