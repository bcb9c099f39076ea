//! What the user already wrote is kept: their derives (not derived twice; PartialEq and Default
//! carry over to the resource type), their camelCase rename_all, a field rename (which the scale
//! paths follow), a run policy under another name, categories and several short names.
use std::collections::BTreeMap;

use kfop_runtime::TrainingJob;
use kfop_runtime::api::{ReplicaSpec, RunPolicy};
use kfop_runtime::kube::CustomResourceExt;
use kfop_runtime::serde::{Deserialize, Serialize};

/// A job of the bar framework.
#[kfop_runtime::training_job(
    group = "example.com",
    version = "v1",
    kind = "BarJob",
    plural = "barjobs",
    shortname = "bar",
    shortname = "bj",
    category = "ml",
    category = "all",
    controller = "barjob-controller",
    framework = "bar",
    container = "bar",
    port_name = "bar-port",
    port = 1,
    scale = "Worker",
    role(name = "Launcher", master, restart_policy = "ExitCode", max_replicas = 1),
    role(name = "Worker", restart_policy = "Always", default_replicas = 0)
)]
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BarJobSpec {
    #[kfop(run_policy)]
    #[serde(default)]
    pub policy: RunPolicy,
    #[kfop(replica_specs)]
    #[serde(rename = "barReplicaSpecs")]
    pub specs: BTreeMap<String, ReplicaSpec>,
}

fn main() {
    let job = BarJob::new("b", BarJobSpec::default());
    assert_eq!(job, BarJob::new("b", BarJobSpec::default()));
    assert_eq!(BarJob::default().spec, BarJobSpec::default());
    assert_eq!(job.run_policy(), &RunPolicy::default());
    let crd = BarJob::crd();
    assert_eq!(crd.spec.names.short_names, Some(vec!["bar".to_owned(), "bj".to_owned()]));
    assert_eq!(crd.spec.names.categories, Some(vec!["ml".to_owned(), "all".to_owned()]));
    let scale = crd.spec.versions[0].subresources.clone().unwrap().scale.unwrap();
    assert_eq!(scale.spec_replicas_path, ".spec.barReplicaSpecs.Worker.replicas");
    let info = BarJob::framework_info();
    assert!(info.roles[0].master);
    assert_eq!(info.roles[1].default_replicas, 0);
    let json = kfop_runtime::serde_json::to_value(&job.spec).unwrap();
    assert!(json.get("barReplicaSpecs").is_some() && json.get("policy").is_some());
}
