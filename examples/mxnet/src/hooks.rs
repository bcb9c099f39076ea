//! MXJob: MX_CONFIG and the DMLC_* variables, as Kubeflow's mxnet controller writes them.
use kfop_runtime::api::ReplicaSpec;
use kfop_runtime::env::EnvContext;
use kfop_runtime::k8s_openapi::api::core::v1::{EnvVar, PodTemplateSpec};
use kfop_runtime::kube::ResourceExt;
use kfop_runtime::labels::child_name;
use kfop_runtime::{Framework, FrameworkError, PodContext};

use crate::api::MXJob;

/// The replica-template annotation whose value MX_CONFIG carries as the role's label.
const TUNER_SERVER_KEY: &str = "tuner-server-key";

/// MX_CONFIG as Go's encoder writes it: cluster, labels, task; role keys sorted.
pub fn mx_config(ctx: &EnvContext<'_>) -> Result<String, String> {
    let mut cluster = Vec::new();
    let mut labels = Vec::new();
    for (role, spec) in ctx.specs {
        let rt = role.to_lowercase();
        let port = ctx.port(role).map_err(|e| e.0)?;
        let hosts: Vec<String> = (0..spec.replicas())
            .map(|i| {
                format!(
                    r#"{{"url":{},"port":{port}}}"#,
                    kfop_runtime::serde_json::Value::from(child_name(ctx.job, role, i))
                )
            })
            .collect();
        cluster.push((rt.clone(), format!("[{}]", hosts.join(","))));
        let label = spec
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.annotations.as_ref())
            .and_then(|a| a.get(TUNER_SERVER_KEY));
        labels.push((
            rt,
            kfop_runtime::serde_json::Value::from(label.cloned().unwrap_or_default()).to_string(),
        ));
    }
    cluster.sort();
    labels.sort();
    let object = |pairs: &[(String, String)]| {
        let fields: Vec<String> = pairs
            .iter()
            .map(|(k, v)| format!("{}:{v}", kfop_runtime::serde_json::Value::from(k.as_str())))
            .collect();
        format!("{{{}}}", fields.join(","))
    };
    Ok(format!(
        r#"{{"cluster":{},"labels":{},"task":{{"type":{},"index":{}}}}}"#,
        object(&cluster),
        object(&labels),
        kfop_runtime::serde_json::Value::from(ctx.role.to_lowercase()),
        ctx.index
    ))
}

/// The MXJob framework's code.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mxnet;

impl Framework for Mxnet {
    type Job = MXJob;

    fn decorate_pod(
        &self,
        ctx: &PodContext<'_, MXJob>,
        template: &mut PodTemplateSpec,
    ) -> Result<(), FrameworkError> {
        let name = ctx.job.name_any();
        let (config, scheduler_port) = ctx.with_env(|env| (mx_config(env), env.port("Scheduler")));
        let config = config.map_err(FrameworkError::new)?;
        let replicas = |role: &str| ctx.specs.get(role).map_or(0, ReplicaSpec::replicas);
        let (root_uri, root_port) = match ctx.specs.get("Scheduler").filter(|s| s.replicas() > 0) {
            Some(_) => (
                child_name(&name, "Scheduler", 0),
                scheduler_port.map_err(|e| FrameworkError::with_source("the Scheduler port", e))?,
            ),
            None => (String::new(), 0),
        };
        let mut vars = vec![
            ("MX_CONFIG", config),
            ("DMLC_PS_ROOT_PORT", root_port.to_string()),
            ("DMLC_PS_ROOT_URI", root_uri),
            ("DMLC_NUM_SERVER", replicas("Server").to_string()),
            ("DMLC_NUM_WORKER", replicas("Worker").to_string()),
            ("DMLC_ROLE", ctx.role.to_lowercase()),
            ("DMLC_USE_KUBERNETES", "1".to_owned()),
        ];
        if ctx.role == "Worker" {
            vars.push(("DMLC_WORKER_ID", ctx.index.to_string()));
        }
        let Some(pod) = template.spec.as_mut() else {
            return Ok(());
        };
        for container in &mut pod.containers {
            let list = container.env.get_or_insert_with(Vec::new);
            list.extend(vars.iter().map(|(k, v)| EnvVar {
                name: (*k).to_owned(),
                value: Some(v.clone()),
                value_from: None,
            }));
        }
        Ok(())
    }
}
