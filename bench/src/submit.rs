//! PyTorchJobs for the benchmark and their submission, all at once or at a rate.
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::json;

use crate::error::{Error, Result};
use crate::observe::Observed;

pub const MASTERS: usize = 1;
pub const WORKERS: usize = 3;
pub const PODS_PER_JOB: usize = MASTERS + WORKERS;

/// The name of job `index`.
pub fn job_name(index: usize) -> String {
    format!("bench-{index:05}")
}

/// A PyTorchJob with 1 master and 3 workers whose pods kwok ends with exit code 0 after `run_for`.
pub fn pytorch_job(name: &str, run_for: Duration) -> Result<DynamicObject> {
    let (key, value) = kfop_testenv::pods::complete_after(run_for);
    let template = json!({
        "metadata": { "annotations": { key: value } },
        "spec": { "containers": [{
            "name": "pytorch",
            "image": "docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727",
            "command": ["python3", "/opt/pytorch-mnist/mnist.py", "--epochs=1"],
            "resources": { "requests": { "cpu": "10m", "memory": "16Mi" } },
        }]},
    });
    Ok(serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": { "name": name },
        "spec": { "pytorchReplicaSpecs": {
            "Master": { "replicas": MASTERS, "restartPolicy": "OnFailure", "template": template },
            "Worker": { "replicas": WORKERS, "restartPolicy": "OnFailure", "template": template },
        }},
    }))?)
}

/// How jobs are sent.
#[derive(Debug, Clone, Copy)]
pub enum Pace {
    /// As fast as `parallelism` creates in flight allow.
    AllAtOnce { parallelism: usize },
    /// One job every `1 / rate` seconds.
    Rate(f64),
}

/// Creates `count` jobs in `api`'s namespace, recording each submission in `observed`.
pub async fn submit(
    api: &Api<DynamicObject>,
    count: usize,
    run_for: Duration,
    pace: Pace,
    observed: &Observed,
) -> Result<()> {
    let jobs = (0..count)
        .map(|i| {
            let name = job_name(i);
            pytorch_job(&name, run_for).map(|job| (name, job))
        })
        .collect::<Result<Vec<_>>>()?;
    let api = Arc::new(api.clone());
    let create = |(name, job): (String, DynamicObject)| {
        let api = api.clone();
        let observed = observed.clone();
        async move {
            let at = observed.now();
            observed.with(|t| t.submitted(&name, at));
            api.create(&PostParams::default(), &job)
                .await
                .map(|_| ())
                .map_err(Error::kube(format!("creating PyTorchJob {name}")))
        }
    };
    match pace {
        Pace::AllAtOnce { parallelism } => {
            let results: Vec<Result<()>> = futures::stream::iter(jobs)
                .map(create)
                .buffer_unordered(parallelism.max(1))
                .collect()
                .await;
            results.into_iter().collect()
        }
        Pace::Rate(rate) => {
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let mut tasks = Vec::new();
            for job in jobs {
                tick.tick().await;
                tasks.push(tokio::spawn(create(job)));
            }
            for task in tasks {
                task.await.map_err(|e| Error::Phase {
                    phase: "submit".into(),
                    message: e.to_string(),
                })??;
            }
            Ok(())
        }
    }
}

/// The PyTorchJob API resource.
pub fn pytorch_resource() -> ApiResource {
    ApiResource {
        group: "kubeflow.org".into(),
        version: "v1".into(),
        api_version: "kubeflow.org/v1".into(),
        kind: "PyTorchJob".into(),
        plural: "pytorchjobs".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_shape() {
        let job = pytorch_job("bench-00007", Duration::from_millis(2500)).unwrap();
        assert_eq!(job.metadata.name.as_deref(), Some("bench-00007"));
        let specs = &job.data["spec"]["pytorchReplicaSpecs"];
        assert_eq!(specs["Master"]["replicas"], 1);
        assert_eq!(specs["Worker"]["replicas"], 3);
        assert_eq!(
            specs["Worker"]["template"]["metadata"]["annotations"]["kwok.kfop.dev/complete-after-ms"],
            "2500"
        );
        assert_eq!(job_name(42), "bench-00042");
    }
}
