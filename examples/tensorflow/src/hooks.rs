//! TFJob: TF_CONFIG, chief/master status and successPolicy, as Kubeflow's tensorflow controller.
use std::collections::BTreeMap;

use kfop_runtime::api::{JobConditionType, ReplicaSpec};
use kfop_runtime::env::EnvContext;
use kfop_runtime::k8s_openapi::api::core::v1::{EnvVar, PodTemplateSpec};
use kfop_runtime::labels::child_name;
use kfop_runtime::serde_json::{Value, json};
use kfop_runtime::{Framework, FrameworkError, PodContext, StatusUpdate};

use crate::api::TFJob;
use crate::spec;

/// Replica types in the order Kubeflow's status function visits them.
const ORDER: [&str; 5] = ["Chief", "Evaluator", "Master", "PS", "Worker"];

/// Kubeflow's `genTFConfigJSONStr`: keys sorted, `<job>-<rt>-<i>.<ns>.svc[.<domain>]:<port>`.
pub fn tf_config(ctx: &EnvContext<'_>, domain: &str, dynamic: bool) -> Result<String, String> {
    let mut cluster = BTreeMap::new();
    for (role, spec) in ctx.specs {
        let port = ctx.port(role).map_err(|e| e.0)?;
        let hosts: Vec<String> = (0..spec.replicas())
            .map(|i| {
                let mut svc = format!("{}.{}.svc", child_name(ctx.job, role, i), ctx.namespace);
                if !domain.is_empty() {
                    svc = format!("{svc}.{domain}");
                }
                format!("{svc}:{port}")
            })
            .collect();
        cluster.insert(role.to_lowercase(), hosts);
    }
    let rt = ctx.role.to_lowercase();
    // Go's encoder writes struct fields in declaration order and map keys sorted; serde_json's
    // maps are sorted too, so only the struct-shaped parts are written by hand.
    let task = format!(r#"{{"type":{},"index":{}}}"#, Value::from(rt.as_str()), ctx.index);
    if !dynamic {
        return Ok(format!(
            r#"{{"cluster":{},"task":{task},"environment":"cloud"}}"#,
            json!(cluster)
        ));
    }
    let index = usize::try_from(ctx.index).unwrap_or_default();
    let (worker, ps): (BTreeMap<String, String>, Value) = match rt.as_str() {
        "ps" => (
            BTreeMap::new(),
            json!(
                cluster
                    .get("ps")
                    .and_then(|p| p.get(index))
                    .into_iter()
                    .collect::<Vec<_>>()
            ),
        ),
        "worker" => (
            cluster
                .get("worker")
                .and_then(|w| w.get(index))
                .map(|h| (ctx.index.to_string(), h.clone()))
                .into_iter()
                .collect(),
            cluster.get("ps").map_or(Value::Null, |p| json!(p)),
        ),
        _ => (BTreeMap::new(), json!([])),
    };
    Ok(format!(
        r#"{{"cluster":{{"worker":{},"ps":{ps}}},"task":{task}}}"#,
        json!(worker)
    ))
}

/// The TFJob framework's code and its configuration.
#[derive(Debug, Clone, Default)]
pub struct Tensorflow {
    /// The cluster domain TF_CONFIG's host names end in, empty for none (Kubeflow's
    /// `CUSTOM_CLUSTER_DOMAIN`).
    pub cluster_domain: String,
}

impl Framework for Tensorflow {
    type Job = TFJob;

    /// Chief or Master if present, else worker 0.
    fn is_master(
        &self,
        specs: &BTreeMap<String, ReplicaSpec>,
        role: &str,
        index: i32,
        declared: bool,
    ) -> bool {
        let _ = declared;
        if specs.contains_key("Chief") || specs.contains_key("Master") {
            matches!(role, "Chief" | "Master")
        } else {
            role == "Worker" && index == 0
        }
    }

    /// TF_CONFIG on the first `tensorflow` container of a distributed job (more than one replica).
    fn decorate_pod(
        &self,
        ctx: &PodContext<'_, TFJob>,
        template: &mut PodTemplateSpec,
    ) -> Result<(), FrameworkError> {
        let total = ReplicaSpec::total(ctx.specs.values());
        if total == 1 {
            return Ok(());
        }
        let dynamic = ctx.job.spec.extra.enable_dynamic_worker.unwrap_or(false);
        let value = ctx
            .with_env(|env| tf_config(env, &self.cluster_domain, dynamic))
            .map_err(FrameworkError::new)?;
        let Some(pod) = template.spec.as_mut() else {
            return Ok(());
        };
        if let Some(c) = pod.containers.iter_mut().find(|c| c.name == "tensorflow") {
            c.env.get_or_insert_with(Vec::new).push(EnvVar {
                name: "TF_CONFIG".into(),
                value: Some(value),
                value_from: None,
            });
        }
        Ok(())
    }

    /// Kubeflow's TFJob `UpdateJobStatus`, with one fix: a job whose chief succeeded is not also
    /// marked Failed by worker failures in the same pass (Kubeflow appends both, its case 17).
    fn update_status(&self, job: &TFJob, u: &mut StatusUpdate<'_>) {
        let (ns, name) = (u.namespace().to_owned(), u.name().to_owned());
        let all_workers = job.spec.extra.success_policy == Some(spec::SuccessPolicy::AllWorkers);
        let dynamic = job.spec.extra.enable_dynamic_worker.unwrap_or(false);
        let has_chief = u.specs().contains_key("Chief") || u.specs().contains_key("Master");
        let worker0_completed = u.role("Worker").is_none_or(|w| w.completed_indices.contains(&0));
        let restarting = u.status().condition(JobConditionType::Restarting).is_some();
        for rtype in ORDER {
            let Some(r) = u.role(rtype) else { continue };
            let (expected, running, failed) = (r.replicas - r.succeeded, r.active, r.failed);
            if has_chief {
                if matches!(rtype, "Chief" | "Master") {
                    if running > 0 {
                        u.set_running(format!("TFJob {ns}/{name} is running."));
                    }
                    if expected == 0 {
                        u.set_succeeded(format!("TFJob {ns}/{name} successfully completed."));
                    }
                }
            } else if rtype == "Worker" {
                if expected == 0 || (worker0_completed && !all_workers) {
                    u.set_succeeded(format!("TFJob {ns}/{name} successfully completed."));
                } else if running > 0 {
                    u.set_running(format!("TFJob {ns}/{name} is running."));
                }
            }
            if failed > 0 && !u.status().is(JobConditionType::Succeeded) {
                if restarting {
                    u.set_restarting(format!(
                        "job {name} is restarting because {rtype} replica(s) failed."
                    ));
                } else if !(dynamic && rtype == "Worker") {
                    u.set_failed(format!(
                        "TFJob {ns}/{name} has failed because {failed} {rtype} replica(s) failed."
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs(roles: &[(&str, i32)]) -> BTreeMap<String, ReplicaSpec> {
        roles
            .iter()
            .map(|(r, n)| {
                let spec = kfop_runtime::serde_json::from_value(json!({"replicas": n, "template": {"spec": {"containers": [
                    {"name": "tensorflow", "image": "x", "ports": [{"name": "tfjob-port", "containerPort": 2222}]}]}}}))
                .unwrap();
                ((*r).to_owned(), spec)
            })
            .collect()
    }

    fn config(
        roles: &[(&str, i32)],
        ns: &str,
        role: &str,
        index: i32,
        domain: &str,
        dynamic: bool,
    ) -> String {
        let s = specs(roles);
        let ctx = EnvContext {
            info: <TFJob as kfop_runtime::TrainingJob>::framework_info(),
            job: "test-tfjob",
            namespace: ns,
            specs: &s,
            role,
            index,
        };
        tf_config(&ctx, domain, dynamic).unwrap()
    }

    /// Kubeflow's `Test ClusterSpec` strings.
    #[test]
    fn tf_config_matches_kubeflow() {
        assert_eq!(
            config(
                &[("Worker", 1), ("PS", 1)],
                "ns2",
                "Worker",
                0,
                "tf.training.org",
                false
            ),
            r#"{"cluster":{"ps":["test-tfjob-ps-0.ns2.svc.tf.training.org:2222"],"worker":["test-tfjob-worker-0.ns2.svc.tf.training.org:2222"]},"task":{"type":"worker","index":0},"environment":"cloud"}"#
        );
        assert_eq!(
            config(
                &[("Worker", 1), ("PS", 1), ("Evaluator", 1)],
                "ns3",
                "Worker",
                0,
                "tf.training.io",
                false
            ),
            r#"{"cluster":{"evaluator":["test-tfjob-evaluator-0.ns3.svc.tf.training.io:2222"],"ps":["test-tfjob-ps-0.ns3.svc.tf.training.io:2222"],"worker":["test-tfjob-worker-0.ns3.svc.tf.training.io:2222"]},"task":{"type":"worker","index":0},"environment":"cloud"}"#
        );
        assert_eq!(
            config(
                &[("Worker", 1), ("PS", 1), ("Evaluator", 1)],
                "ns3",
                "Worker",
                0,
                "",
                false
            ),
            r#"{"cluster":{"evaluator":["test-tfjob-evaluator-0.ns3.svc:2222"],"ps":["test-tfjob-ps-0.ns3.svc:2222"],"worker":["test-tfjob-worker-0.ns3.svc:2222"]},"task":{"type":"worker","index":0},"environment":"cloud"}"#
        );
    }

    #[test]
    fn sparse_tf_config_for_dynamic_workers() {
        let roles = [("Worker", 2), ("PS", 2)];
        assert_eq!(
            config(&roles, "default", "Worker", 1, "", true),
            r#"{"cluster":{"worker":{"1":"test-tfjob-worker-1.default.svc:2222"},"ps":["test-tfjob-ps-0.default.svc:2222","test-tfjob-ps-1.default.svc:2222"]},"task":{"type":"worker","index":1}}"#
        );
        assert_eq!(
            config(&roles, "default", "PS", 0, "", true),
            r#"{"cluster":{"worker":{},"ps":["test-tfjob-ps-0.default.svc:2222"]},"task":{"type":"ps","index":0}}"#
        );
        assert_eq!(
            config(&[("Worker", 2)], "default", "Worker", 0, "", true),
            r#"{"cluster":{"worker":{"0":"test-tfjob-worker-0.default.svc:2222"},"ps":null},"task":{"type":"worker","index":0}}"#
        );
    }

    #[test]
    fn master_role() {
        let with_chief = specs(&[("Chief", 1), ("Worker", 2)]);
        assert!(Framework::is_master(
            &Tensorflow::default(),
            &with_chief,
            "Chief",
            0,
            true
        ));
        assert!(!Framework::is_master(
            &Tensorflow::default(),
            &with_chief,
            "Worker",
            0,
            false
        ));
        let workers = specs(&[("Worker", 2), ("PS", 1)]);
        assert!(Framework::is_master(
            &Tensorflow::default(),
            &workers,
            "Worker",
            0,
            false
        ));
        assert!(!Framework::is_master(
            &Tensorflow::default(),
            &workers,
            "Worker",
            1,
            false
        ));
    }
}
