//! From a validated [`Model`] to the [`Manifest`] the engine runs: the one path every framework
//! takes, compiled in (its embedded `kfop.yaml`) or applied at run time (a `Framework` object).
use std::path::Path;

use kube::api::ApiResource;

use super::model::{EnvModel, ManifestError, Model, StatusModel, SuccessKind};
use super::{Manifest, MasterRule};
use crate::api::RestartPolicy;
use crate::cel_rule::CelRule;
use crate::env::{EnvSpec, EnvValue, Template, TemplateError};
use crate::info::{FrameworkInfo, FrameworkPort, Role};
use crate::policy::SuccessPolicy;
use crate::status_rule::{CelStatus, StatusRule};

/// Why a manifest cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The text does not parse or validate: the message names the line and field.
    #[error("{0}")]
    Invalid(#[from] ManifestError),
    #[error("spec.env: {0}")]
    Env(#[from] TemplateError),
    #[error("spec.roles: restart policy `{0}` is unknown")]
    RestartPolicy(String),
}

impl Manifest {
    /// Parses, validates and loads `text`; `file` names it in messages.
    pub fn load(text: &str, file: &Path) -> Result<Self, LoadError> {
        Self::from_model(&super::model::parse(text, file)?)
    }

    /// The manifest a validated model describes.
    pub fn from_model(model: &Model) -> Result<Self, LoadError> {
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
        Ok(Self {
            info: FrameworkInfo {
                controller_name: model.controller_name.clone(),
                framework_name: model.framework_name.clone(),
                default_container: model.container.clone(),
                default_port: model
                    .port
                    .as_ref()
                    .map(|(name, number)| FrameworkPort::new(name, *number)),
                roles,
            },
            kind: api_resource(model),
            env,
            status: status_rule(model),
            master: if model.master_index_zero {
                MasterRule::IndexZero
            } else {
                MasterRule::Roles
            },
            owned: model.resources.iter().filter_map(|r| r.api_resource()).collect(),
            hooks: model.hooks,
        })
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
        StatusModel::Hook => StatusRule::Hook,
    }
}

/// The default of every manifest field a test does not care about.
#[cfg(any(test, feature = "testing"))]
impl Manifest {
    /// A manifest with `info`, kind `kind`, no env, owned kinds or hooks, and status `rule`.
    pub fn of(info: FrameworkInfo, kind: ApiResource, status: StatusRule) -> Self {
        Self {
            info,
            kind,
            env: Vec::new(),
            status,
            master: MasterRule::Roles,
            owned: Vec::new(),
            hooks: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status_rule::RuleWording;

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

    fn load(text: &str) -> Manifest {
        Manifest::load(text, Path::new("jaxlike")).unwrap()
    }

    #[test]
    fn a_manifest_loads() {
        let manifest = load(JAX_LIKE);
        assert_eq!(manifest.info.roles[0].name, "Worker");
        assert_eq!(
            manifest.info.roles[0].default_restart_policy,
            RestartPolicy::Never
        );
        assert_eq!(
            manifest.info.default_port,
            Some(FrameworkPort::new("jax-port", 6666))
        );
        assert_eq!(manifest.master, MasterRule::IndexZero);
        assert_eq!(manifest.env.len(), 2);
        assert_eq!(manifest.kind.plural, "jaxlikejobs");
        assert_eq!(manifest.kind.api_version, "example.com/v1");
        assert!(manifest.owned.is_empty());
        assert_eq!(
            manifest.status,
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
        let status = load(&text).status;
        assert_eq!(
            status,
            StatusRule::Cel(CelStatus {
                succeeded: CelRule::deferred("replicas.Worker.succeeded > 0"),
                running: None,
                failed: Some(CelRule::deferred("replicas.Worker.failed > 1")),
                wording: RuleWording::default(),
            })
        );
        assert_eq!(status.check(), Ok(()));
        let StatusRule::Cel(CelStatus { succeeded, .. }) = &status else {
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
    fn an_invalid_manifest_names_its_field() {
        let text = JAX_LIKE.replace("restartPolicy: Never", "restartPolicy: Sometimes");
        let error = Manifest::load(&text, Path::new("jaxlike"))
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("jaxlike:"), "{error}");
        assert!(error.contains("restartPolicy"), "{error}");
    }
}
