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
pub enum FooJobSpec {
    A,
    B,
}

fn main() {}
