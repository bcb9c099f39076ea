#[kfop_runtime::training_job(
    group = "kubeflow.org",
    version = "v1",
    kind = "FooJob",
    controller = "foojob-controller",
    framework = "foo",
    container = "foo",
    port_name = "foojob-port",
    port = 7777,
    role(name = "Worker", restart_policy = "OnFailure")
)]
pub struct FooJobSpec(kfop_runtime::api::RunPolicy, std::collections::BTreeMap<String, kfop_runtime::api::ReplicaSpec>);

fn main() {}
