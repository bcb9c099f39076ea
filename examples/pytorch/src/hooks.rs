//! PyTorchJob: torchrun's environment (MASTER_*, WORLD_SIZE, RANK, PET_*), the init container
//! that waits for the master, and Kubeflow's PyTorchJob status messages.
use std::collections::BTreeMap;

use kfop_runtime::api::ReplicaSpec;
use kfop_runtime::env::EnvContext;
use kfop_runtime::k8s_openapi::api::core::v1::{Container, EnvVar, PodTemplateSpec};
use kfop_runtime::kube::ResourceExt;
use kfop_runtime::labels::child_name;
use kfop_runtime::{DesiredObject, Framework, FrameworkError, JobContext, PodContext, StatusUpdate};

use crate::api::PyTorchJob;
use crate::elastic;

/// Kubeflow's default image of the init container that waits for the master's DNS name.
pub const INIT_IMAGE: &str = "alpine:3.10";
const INIT_MAX_TRIES: u32 = 100;

/// `nprocPerNode` with Kubeflow's default: `auto` unless the deprecated elastic field is set.
fn nproc_per_node(job: &PyTorchJob) -> Option<String> {
    let extra = &job.spec.extra;
    match (
        &extra.nproc_per_node,
        extra.elastic_policy.as_ref().and_then(|e| e.n_proc_per_node),
    ) {
        (Some(n), _) => Some(n.clone()),
        (None, Some(_)) => None,
        (None, None) => Some("auto".to_owned()),
    }
}

/// The variables Kubeflow's `setPodEnv` appends to every container, in its order.
pub fn env(job: &PyTorchJob, ctx: &EnvContext<'_>) -> Result<Vec<(String, String)>, String> {
    let mut vars: Vec<(String, String)> = Vec::new();
    let mut push = |k: &str, v: String| vars.push((k.to_owned(), v));
    let total = ReplicaSpec::total(ctx.specs.values());
    if ctx.specs.contains_key("Master") {
        let nproc = nproc_per_node(job)
            .and_then(|n| n.parse::<i32>().ok())
            .unwrap_or(1);
        let port = ctx.port("Master").map_err(|e| e.0)?.to_string();
        let addr = child_name(ctx.job, "Master", 0);
        let rank = ctx.index + i32::from(ctx.role == "Worker");
        push("MASTER_PORT", port.clone());
        push("PET_MASTER_PORT", port);
        push("MASTER_ADDR", addr.clone());
        push("PET_MASTER_ADDR", addr);
        push("WORLD_SIZE", (total * nproc).to_string());
        push("RANK", rank.to_string());
        push("PET_NODE_RANK", rank.to_string());
    }
    if let Some(n) = nproc_per_node(job) {
        push("PET_NPROC_PER_NODE", n);
    }
    match &job.spec.extra.elastic_policy {
        None => push("PET_NNODES", total.to_string()),
        Some(e) => {
            let host = e
                .rdzv_host
                .clone()
                .unwrap_or_else(|| child_name(ctx.job, "Worker", 0));
            let port = match e.rdzv_port {
                Some(p) => p,
                None => ctx.port("Worker").map_err(|e| e.0)?,
            };
            push("PET_RDZV_ENDPOINT", format!("{host}:{port}"));
            push(
                "PET_RDZV_BACKEND",
                e.rdzv_backend.clone().unwrap_or_else(|| "c10d".to_owned()),
            );
            let workers = ctx.specs.get("Worker").map(ReplicaSpec::replicas);
            let (min, max) = e.bounds(workers).ok_or("cannot find the worker spec")?;
            push("PET_NNODES", format!("{min}:{max}"));
            if let Some(n) = e.max_restarts {
                push("PET_MAX_RESTARTS", n.to_string());
            }
            if let Some(n) = e.n_proc_per_node {
                push("PET_NPROC_PER_NODE", n.to_string());
            }
            if let Some(id) = &e.rdzv_id {
                push("PET_RDZV_ID", id.clone());
            }
            if let Some(conf) = e.rdzv_conf.as_ref().filter(|c| !c.is_empty()) {
                let joined: Vec<String> = conf.iter().map(|c| format!("{}={}", c.key, c.value)).collect();
                push("PET_RDZV_CONF", joined.join(","));
            }
            if e.standalone == Some(true) {
                push("PET_STANDALONE", String::new());
            }
        }
    }
    Ok(vars)
}

/// The PyTorchJob framework's code and its configuration.
#[derive(Debug, Clone)]
pub struct Pytorch {
    /// Image of the init container that waits for the master (Kubeflow's
    /// `--pytorch-init-container-image`).
    pub init_container_image: String,
}

impl Default for Pytorch {
    fn default() -> Self {
        Self {
            init_container_image: INIT_IMAGE.to_owned(),
        }
    }
}

/// Kubeflow's `init-pytorch`: wait until the master's service name resolves.
fn init_container(image: &str, master: &str) -> Result<Container, FrameworkError> {
    kfop_runtime::serde_json::from_value(kfop_runtime::serde_json::json!({
        "name": "init-pytorch",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "resources": { "limits": { "cpu": "100m", "memory": "20Mi" }, "requests": { "cpu": "50m", "memory": "10Mi" } },
        "command": ["sh", "-c", format!(
            "err=1;for i in $(seq {INIT_MAX_TRIES}); do if nslookup {master}; then err=0 && break; fi;echo waiting for master; sleep 2; done; exit $err"
        )],
    }))
    .map_err(|e| FrameworkError::with_source("building the init container", e))
}

impl Framework for Pytorch {
    type Job = PyTorchJob;

    /// Master if present, else worker 0 (Kubeflow v1.8).
    fn is_master(
        &self,
        specs: &BTreeMap<String, ReplicaSpec>,
        role: &str,
        index: i32,
        declared: bool,
    ) -> bool {
        if specs.contains_key("Master") {
            declared
        } else {
            role == "Worker" && index == 0
        }
    }

    fn decorate_pod(
        &self,
        ctx: &PodContext<'_, PyTorchJob>,
        template: &mut PodTemplateSpec,
    ) -> Result<(), FrameworkError> {
        let name = ctx.job.name_any();
        let vars = ctx.with_env(|e| env(ctx.job, e)).map_err(FrameworkError::new)?;
        let Some(pod) = template.spec.as_mut() else {
            return Ok(());
        };
        for container in &mut pod.containers {
            let list = container.env.get_or_insert_with(Vec::new);
            list.extend(vars.iter().map(|(k, v)| EnvVar {
                name: k.clone(),
                value: Some(v.clone()),
                value_from: None,
            }));
        }
        if ctx.role == "Worker" && ctx.specs.contains_key("Master") {
            pod.init_containers
                .get_or_insert_with(Vec::new)
                .push(init_container(
                    &self.init_container_image,
                    &child_name(&name, "Master", 0),
                )?);
        }
        Ok(())
    }

    /// Kubeflow's PyTorchJob `UpdateJobStatus` (Master, then Worker: Kubeflow's map order is random).
    fn update_status(&self, job: &PyTorchJob, u: &mut StatusUpdate<'_>) {
        // An elastic job succeeds with its first succeeded worker.
        u.apply_leader_or_followers(Some("Master"), "Worker", job.spec.extra.elastic_policy.is_some());
    }

    /// The elastic job's HorizontalPodAutoscaler.
    fn desired_objects(
        &self,
        ctx: &JobContext<'_, PyTorchJob>,
    ) -> Result<Vec<DesiredObject>, FrameworkError> {
        elastic::desired_objects(ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::PyTorchJob;
    use kfop_runtime::TrainingJob;
    use kfop_runtime::serde_json::json;

    fn job(spec: kfop_runtime::serde_json::Value) -> PyTorchJob {
        kfop_runtime::serde_json::from_value(json!({
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": { "name": "test-job", "namespace": "default" },
            "spec": spec,
        }))
        .unwrap()
    }

    fn replica(n: i32, port: i32) -> kfop_runtime::serde_json::Value {
        json!({ "replicas": n, "template": { "spec": { "containers": [
            { "name": "pytorch", "image": "x", "ports": [{ "name": "pytorchjob-port", "containerPort": port }] }
        ] } } })
    }

    fn vars(job: &PyTorchJob, role: &str, index: i32) -> Vec<(String, String)> {
        let specs = kfop_runtime::defaults::defaulted_specs(
            <PyTorchJob as TrainingJob>::framework_info(),
            &job.spec.pytorch_replica_specs,
        );
        let ctx = EnvContext {
            info: <PyTorchJob as TrainingJob>::framework_info(),
            job: "test-job",
            namespace: "default",
            specs: &specs,
            role,
            index,
        };
        env(job, &ctx).unwrap()
    }

    fn get<'a>(vars: &'a [(String, String)], key: &str) -> Option<&'a str> {
        vars.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Kubeflow's "Should get the corresponding resources" case: 1 master (port 8080) + 2 workers.
    #[test]
    fn master_worker_env() {
        let j =
            job(json!({ "pytorchReplicaSpecs": { "Master": replica(1, 8080), "Worker": replica(2, 8080) } }));
        let w = vars(&j, "Worker", 1);
        let names: Vec<&str> = w.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "MASTER_PORT",
                "PET_MASTER_PORT",
                "MASTER_ADDR",
                "PET_MASTER_ADDR",
                "WORLD_SIZE",
                "RANK",
                "PET_NODE_RANK",
                "PET_NPROC_PER_NODE",
                "PET_NNODES"
            ]
        );
        assert_eq!(get(&w, "MASTER_PORT"), Some("8080"));
        assert_eq!(get(&w, "MASTER_ADDR"), Some("test-job-master-0"));
        assert_eq!(get(&w, "WORLD_SIZE"), Some("3"));
        assert_eq!(get(&w, "RANK"), Some("2"));
        assert_eq!(get(&w, "PET_NPROC_PER_NODE"), Some("auto"));
        assert_eq!(get(&w, "PET_NNODES"), Some("3"));
        assert_eq!(get(&vars(&j, "Master", 0), "RANK"), Some("0"));
    }

    #[test]
    fn nproc_per_node_multiplies_world_size() {
        let j = job(
            json!({ "nprocPerNode": "4", "pytorchReplicaSpecs": { "Master": replica(1, 23456), "Worker": replica(1, 23456) } }),
        );
        assert_eq!(get(&vars(&j, "Worker", 0), "WORLD_SIZE"), Some("8"));
    }

    /// Kubeflow's elastic case: Worker x1, c10d, min 1, max 3, maxRestarts 3.
    #[test]
    fn elastic_env() {
        let j = job(json!({
            "elasticPolicy": { "rdzvBackend": "c10d", "minReplicas": 1, "maxReplicas": 3, "maxRestarts": 3,
                               "rdzvConf": [{ "key": "a", "value": "1" }, { "key": "b", "value": "2" }] },
            "pytorchReplicaSpecs": { "Worker": replica(1, 8080) },
        }));
        let w = vars(&j, "Worker", 0);
        assert_eq!(get(&w, "PET_RDZV_ENDPOINT"), Some("test-job-worker-0:8080"));
        assert_eq!(get(&w, "PET_RDZV_BACKEND"), Some("c10d"));
        assert_eq!(get(&w, "PET_NNODES"), Some("1:3"));
        assert_eq!(get(&w, "PET_MAX_RESTARTS"), Some("3"));
        assert_eq!(get(&w, "PET_RDZV_CONF"), Some("a=1,b=2"));
        assert_eq!(get(&w, "MASTER_ADDR"), None, "worker-only jobs get no MASTER_*");
    }

    /// Kubeflow's defaulting fills a missing bound from the other, or both from the Workers.
    #[test]
    fn elastic_bounds_default_like_kubeflow() {
        for (policy, nnodes) in [
            (json!({}), "2:2"),
            (json!({ "maxReplicas": 4 }), "4:4"),
            (json!({ "minReplicas": 1 }), "1:1"),
        ] {
            let j = job(
                json!({ "elasticPolicy": policy, "pytorchReplicaSpecs": { "Worker": replica(2, 8080) } }),
            );
            assert_eq!(
                get(&vars(&j, "Worker", 0), "PET_NNODES"),
                Some(nnodes),
                "{policy}"
            );
        }
    }

    #[test]
    fn init_container_waits_for_the_master() {
        let c = init_container(INIT_IMAGE, "test-job-master-0").unwrap();
        assert_eq!(c.name, "init-pytorch");
        let command = c.command.unwrap();
        assert!(command[2].contains("nslookup test-job-master-0") && command[2].contains("seq 100"));
    }
}
