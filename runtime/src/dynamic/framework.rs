//! A framework loaded from a manifest while the operator runs: the same [`FrameworkManifest`]
//! `kfop gen` compiles, built from the validated [`Model`] instead, with no hooks.
use kube::api::ApiResource;

use super::job::{JobKind, RuntimeJob};
use crate::api::RestartPolicy;
use crate::cel_rule::CelRule;
use crate::env::{EnvSpec, EnvValue, Template, TemplateError};
use crate::info::{FrameworkInfo, FrameworkPort, Role};
use crate::manifest::model::{EnvModel, Model, StatusModel, SuccessKind};
use crate::manifest::{FrameworkManifest, Manifest, MasterRule};
use crate::policy::SuccessPolicy;
use crate::status_rule::{CelStatus, RuleWording, StatusRule};

/// A manifest-only framework of a run-time job kind.
#[derive(Debug)]
pub struct RuntimeFramework {
    info: FrameworkInfo,
    manifest: FrameworkManifest,
    kind: JobKind,
}

/// Why a validated manifest cannot be run here.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(
        "spec.hooks: a framework loaded at run time has no code; remove `hooks: true` or compile it with `kfop gen`"
    )]
    Hooks,
    #[error("spec.env: {0}")]
    Env(#[from] TemplateError),
    #[error("spec.roles: restart policy `{0}` is unknown")]
    RestartPolicy(String),
}

impl RuntimeFramework {
    /// The framework a validated manifest describes.
    pub fn from_model(model: &Model) -> Result<Self, LoadError> {
        if model.hooks {
            return Err(LoadError::Hooks);
        }
        let roles = model
            .roles
            .iter()
            .map(|r| {
                let policy = restart_policy(&r.restart_policy)?;
                let role = Role::new(&r.name, policy).default_replicas(r.default_replicas);
                Ok(if r.master { role.master() } else { role })
            })
            .collect::<Result<Vec<_>, LoadError>>()?;
        let names: Vec<&str> = model.roles.iter().map(|r| r.name.as_str()).collect();
        let env = model
            .env
            .iter()
            .map(|e| env_spec(e, &names))
            .collect::<Result<Vec<_>, _>>()?;
        let info = FrameworkInfo {
            controller_name: model.controller_name.clone(),
            framework_name: model.framework_name.clone(),
            default_container: model.container.clone(),
            default_port: model
                .port
                .as_ref()
                .map(|(name, number)| FrameworkPort::new(name, *number)),
            roles,
        };
        let manifest = FrameworkManifest {
            env: Ok(env),
            status: status_rule(model),
            master: if model.master_index_zero {
                MasterRule::IndexZero
            } else {
                MasterRule::Roles
            },
            owned: Vec::new(),
        };
        Ok(Self {
            info,
            manifest,
            kind: JobKind(Some(api_resource(model))),
        })
    }

    /// The job kind's API resource.
    pub fn api_resource(&self) -> Option<&ApiResource> {
        self.kind.0.as_ref()
    }
}

/// The job kind of a manifest.
pub fn api_resource(model: &Model) -> ApiResource {
    ApiResource {
        group: model.group.clone(),
        version: model.version.clone(),
        api_version: format!("{}/{}", model.group, model.version),
        kind: model.kind.clone(),
        plural: model.plural.clone(),
    }
}

fn restart_policy(name: &str) -> Result<RestartPolicy, LoadError> {
    serde_json::from_value(serde_json::Value::String(name.to_owned()))
        .map_err(|_| LoadError::RestartPolicy(name.to_owned()))
}

fn env_spec(e: &EnvModel, roles: &[&str]) -> Result<EnvSpec, TemplateError> {
    let value = match (&e.value, &e.field_ref) {
        (Some(template), _) => EnvValue::Template(Template::parse(template, roles)?),
        (None, field) => EnvValue::FieldRef(field.clone().unwrap_or_default()),
    };
    Ok(EnvSpec {
        name: e.name.clone(),
        value,
        roles: e.roles.clone(),
        requires: e.requires.clone(),
        unless: e.unless.clone(),
        index: e.index,
        all_containers: e.all_containers,
    })
}

fn status_rule(model: &Model) -> StatusRule {
    match &model.status {
        StatusModel::SuccessRules(wording) => StatusRule::SuccessRules {
            rules: model
                .success
                .iter()
                .map(|(kind, role)| match kind {
                    SuccessKind::AllOf => SuccessPolicy::AllOf(role.clone()),
                    SuccessKind::AnyOf => SuccessPolicy::AnyOf(role.clone()),
                    SuccessKind::IndexZeroOf => SuccessPolicy::IndexZeroOf(role.clone()),
                })
                .collect(),
            wording: wording.clone(),
        },
        StatusModel::LeaderOrFollowers { leader, followers } => StatusRule::LeaderOrFollowers {
            leader: leader.clone(),
            followers: followers.clone(),
        },
        // Validated with the manifest: each program is built when a job first needs it.
        StatusModel::Cel {
            succeeded,
            running,
            failed,
            wording,
        } => StatusRule::Cel(CelStatus {
            succeeded: CelRule::deferred(succeeded),
            running: running.as_deref().map(CelRule::deferred),
            failed: failed.as_deref().map(CelRule::deferred),
            wording: wording.clone(),
        }),
        // The validator only lets `hook` through with `hooks: true`, refused above.
        StatusModel::Hook => StatusRule::SuccessRules {
            rules: Vec::new(),
            wording: RuleWording::default(),
        },
    }
}

impl Manifest for RuntimeFramework {
    type Job = RuntimeJob;

    fn manifest(&self) -> &FrameworkManifest {
        &self.manifest
    }

    fn info(&self) -> &FrameworkInfo {
        &self.info
    }

    fn job_type(&self) -> JobKind {
        self.kind.clone()
    }
}

/// A run-time framework has no code: the manifest says everything.
impl crate::hooks::Hooks for RuntimeFramework {}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::framework::Framework;

    const JAX_LIKE: &str = "apiVersion: kfop.dev/v1alpha1
kind: Framework
metadata:
  name: jaxlike
spec:
  group: example.com
  version: v1
  kind: JaxLikeJob
  container:
    name: jax
    portName: jax-port
    port: 6666
  roles:
    - name: Worker
      restartPolicy: Never
  masterPods: indexZero
  env:
    - name: COORDINATOR_ADDRESS
      value: \"{host.Worker.0}:{port.Worker}\"
    - name: PROCESS_ID
      value: \"{index}\"
  status:
    rule: leaderOrFollowers
    followers: Worker
";

    #[test]
    fn a_manifest_becomes_a_framework() {
        let model = crate::manifest::model::parse(JAX_LIKE, Path::new("jaxlike")).unwrap();
        let framework = RuntimeFramework::from_model(&model).unwrap();
        let info = Framework::info(&framework);
        assert_eq!(info.roles[0].name, "Worker");
        assert_eq!(info.roles[0].default_restart_policy, RestartPolicy::Never);
        assert_eq!(info.default_port, Some(FrameworkPort::new("jax-port", 6666)));
        assert_eq!(framework.manifest().master, MasterRule::IndexZero);
        assert_eq!(framework.manifest().env.as_ref().unwrap().len(), 2);
        let kind = Framework::job_type(&framework);
        assert_eq!(<RuntimeJob as kube::Resource>::plural(&kind), "jaxlikejobs");
        assert_eq!(
            framework.manifest().status,
            StatusRule::LeaderOrFollowers {
                leader: None,
                followers: "Worker".into()
            }
        );
    }

    #[test]
    fn a_cel_status_becomes_compiled_rules() {
        let text = JAX_LIKE.replace(
            "    rule: leaderOrFollowers\n    followers: Worker\n",
            "    rule: cel\n    succeeded: replicas.Worker.succeeded > 0\n    failed: replicas.Worker.failed > 1\n",
        );
        let model = crate::manifest::model::parse(&text, Path::new("jaxlike")).unwrap();
        let framework = RuntimeFramework::from_model(&model).unwrap();
        let status = &framework.manifest().status;
        assert_eq!(
            *status,
            StatusRule::Cel(CelStatus {
                succeeded: CelRule::deferred("replicas.Worker.succeeded > 0"),
                running: None,
                failed: Some(CelRule::deferred("replicas.Worker.failed > 1")),
                wording: RuleWording::default(),
            })
        );
        assert_eq!(status.check(), Ok(()));
        let StatusRule::Cel(CelStatus { succeeded, .. }) = status else {
            panic!("{status:?}")
        };
        let counts = std::collections::BTreeMap::from([(
            "Worker".to_owned(),
            crate::cel_rule::Counts {
                total: 2,
                succeeded: 1,
                ..Default::default()
            },
        )]);
        assert_eq!(succeeded.evaluate(&counts), Ok(true));
    }

    #[test]
    fn hooks_are_refused_at_run_time() {
        let text = JAX_LIKE.replace(
            "  masterPods: indexZero\n",
            "  masterPods: indexZero\n  hooks: true\n",
        );
        let model = crate::manifest::model::parse(&text, Path::new("jaxlike")).unwrap();
        let error = RuntimeFramework::from_model(&model).unwrap_err().to_string();
        assert!(error.starts_with("spec.hooks:"), "{error}");
    }
}
