//! `kfop katib-template`: the `trialTemplate` of a Katib Experiment whose Trials are jobs of a
//! kfop kind, and the check of an Experiment's `trialTemplate` against the kinds kfop serves.
//!
//! Katib judges a Trial by GJSON conditions on the job and collects metrics from its primary
//! pods; it defaults both only for the Kubeflow kinds it knows. A kfop kind already declares
//! what Katib needs: its container (`spec.container.name`), its master pods (`master: true`
//! roles or `masterPods: indexZero`, labelled `training.kubeflow.org/job-role=master`) and the
//! conditions every kfop job writes (`Succeeded`, `Failed`). So the template is derived from
//! `kfop.yaml`, with nothing added to it.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Args;
use kfop_runtime::serde_json::{self, Value, json};

use crate::manifest::{self, ManifestError};

/// Katib's condition for a finished job, on kfop's (and Kubeflow's) `Succeeded` condition.
pub const SUCCESS_CONDITION: &str = r#"status.conditions.#(type=="Succeeded")#|#(status=="True")#"#;
/// Katib's condition for a failed job, on the `Failed` condition.
pub const FAILURE_CONDITION: &str = r#"status.conditions.#(type=="Failed")#|#(status=="True")#"#;
/// The label of a job's master pods.
pub const JOB_ROLE: &str = "training.kubeflow.org/job-role";
/// The labels naming a pod's role (lowercase) and index.
pub const REPLICA_TYPE: &str = "training.kubeflow.org/replica-type";
pub const REPLICA_INDEX: &str = "training.kubeflow.org/replica-index";

#[derive(Debug, Args)]
pub struct KatibTemplateArgs {
    /// A bundled Kubeflow kind (PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob)
    #[arg(value_name = "KIND", conflicts_with = "file")]
    kind: Option<String>,
    /// The framework manifest (kfop.yaml) of a kind registered with `kfop apply` or compiled
    #[arg(short = 'f', long = "filename", value_name = "PATH")]
    file: Option<PathBuf>,
    /// Check an Experiment's trialTemplate instead (its kind must be a bundled one or the one of
    /// -f, its primaryPodLabels ones that kind's pods carry)
    #[arg(long, value_name = "EXPERIMENT")]
    check: Option<PathBuf>,
    /// Print a ValidatingAdmissionPolicy (and its binding) instead, with which the API server
    /// itself refuses such Experiments for the bundled kinds and the one of -f
    #[arg(long, conflicts_with = "check")]
    policy: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum KatibError {
    #[error("{path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error("{path}: not a YAML object: {message}")]
    Yaml { path: PathBuf, message: String },
    #[error("{field}: {message}")]
    Field { field: String, message: String },
    #[error("name a kind (e.g. `kfop katib-template PyTorchJob`) or a manifest (`-f kfop.yaml`)")]
    NoKind,
}

fn field(field: &str, message: impl Into<String>) -> KatibError {
    KatibError::Field {
        field: field.to_owned(),
        message: message.into(),
    }
}

/// What Katib needs of a kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KatibKind {
    pub group: String,
    pub version: String,
    pub kind: String,
    /// `spec.<this>` holds the replica specs (`pytorchReplicaSpecs`).
    pub replica_specs_field: String,
    pub container: String,
    /// Roles in manifest order, with whether their pods are masters.
    pub roles: Vec<(String, bool)>,
    /// Pod 0 of every role is a master (`masterPods: indexZero`).
    pub master_index_zero: bool,
}

impl KatibKind {
    /// `Kind.version.group`, an entry of katib-config's `init.controller.trialResources`.
    pub fn trial_resource(&self) -> String {
        format!("{}.{}.{}", self.kind, self.version, self.group)
    }

    /// Whether any pod carries `job-role=master`.
    fn has_masters(&self) -> bool {
        self.master_index_zero || self.roles.iter().any(|(_, master)| *master)
    }

    /// The labels of the pods Katib should treat as primary: the master pods when there are
    /// some, else pod 0 of the first role.
    pub fn primary_pod_labels(&self) -> BTreeMap<String, String> {
        if self.has_masters() {
            BTreeMap::from([(JOB_ROLE.to_owned(), "master".to_owned())])
        } else {
            let role = self
                .roles
                .first()
                .map(|(r, _)| r.to_lowercase())
                .unwrap_or_default();
            BTreeMap::from([
                (REPLICA_TYPE.to_owned(), role),
                (REPLICA_INDEX.to_owned(), "0".to_owned()),
            ])
        }
    }

    /// Whether some pod of this kind carries every label of `labels` (the ones kfop sets:
    /// job-role, replica-type, replica-index; any other label must come from the template).
    fn labels_match_some_pod(
        &self,
        labels: &BTreeMap<String, String>,
        template_labels: &BTreeMap<String, String>,
    ) -> Result<(), String> {
        for (key, value) in labels {
            let ok = match key.as_str() {
                JOB_ROLE => value == "master" && self.has_masters(),
                REPLICA_TYPE => self.roles.iter().any(|(r, _)| r.to_lowercase() == *value),
                REPLICA_INDEX => value.parse::<u32>().is_ok(),
                _ => template_labels.get(key) == Some(value),
            };
            if !ok {
                return Err(format!(
                    "no pod of {} carries {key}={value} (its pods carry {})",
                    self.kind,
                    self.describe_labels()
                ));
            }
        }
        Ok(())
    }

    fn describe_labels(&self) -> String {
        let roles: Vec<String> = self.roles.iter().map(|(r, _)| r.to_lowercase()).collect();
        let mut text = format!("{REPLICA_TYPE} in [{}], {REPLICA_INDEX}", roles.join(", "));
        if self.has_masters() {
            text = format!("{JOB_ROLE}=master on the master pods, {text}");
        }
        text
    }

    /// The `trialTemplate` of an Experiment running this kind: everything but the image, the
    /// command and `trialParameters`, which are the user's.
    pub fn trial_template(&self) -> Value {
        let replica_specs: serde_json::Map<String, Value> = self
            .roles
            .iter()
            .map(|(role, _)| {
                (
                    role.clone(),
                    json!({
                        "replicas": 1,
                        "restartPolicy": "Never",
                        "template": { "spec": { "containers": [{
                            "name": self.container,
                            "image": "IMAGE",
                            "command": ["python3", "train.py", "--lr=${trialParameters.learningRate}"],
                        }]}},
                    }),
                )
            })
            .collect();
        let mut spec = serde_json::Map::new();
        spec.insert(self.replica_specs_field.clone(), Value::Object(replica_specs));
        json!({
            "primaryContainerName": self.container,
            "primaryPodLabels": self.primary_pod_labels(),
            "successCondition": SUCCESS_CONDITION,
            "failureCondition": FAILURE_CONDITION,
            "trialParameters": [{ "name": "learningRate", "description": "Learning rate", "reference": "lr" }],
            "trialSpec": {
                "apiVersion": format!("{}/{}", self.group, self.version),
                "kind": self.kind,
                "spec": spec,
            },
        })
    }
}

/// The bundled Kubeflow kinds Katib runs as Trials (MPIJob and MXJob are left out: Katib's
/// metrics collectors do not follow an MPI launcher, and MXJob is gone from Kubeflow).
pub fn bundled() -> Vec<KatibKind> {
    let kubeflow =
        |kind: &str, field: &str, container: &str, roles: &[(&str, bool)], index_zero: bool| KatibKind {
            group: "kubeflow.org".to_owned(),
            version: "v1".to_owned(),
            kind: kind.to_owned(),
            replica_specs_field: field.to_owned(),
            container: container.to_owned(),
            roles: roles.iter().map(|(r, m)| ((*r).to_owned(), *m)).collect(),
            master_index_zero: index_zero,
        };
    vec![
        kubeflow(
            "PyTorchJob",
            "pytorchReplicaSpecs",
            "pytorch",
            &[("Master", true), ("Worker", false)],
            false,
        ),
        // Worker 0 is the master when there is no Chief (the template has Workers only).
        kubeflow(
            "TFJob",
            "tfReplicaSpecs",
            "tensorflow",
            &[("Worker", false)],
            true,
        ),
        kubeflow(
            "XGBoostJob",
            "xgbReplicaSpecs",
            "xgboost",
            &[("Master", true), ("Worker", false)],
            false,
        ),
        kubeflow(
            "PaddleJob",
            "paddleReplicaSpecs",
            "paddle",
            &[("Master", true), ("Worker", false)],
            false,
        ),
        kubeflow("JAXJob", "jaxReplicaSpecs", "jax", &[("Worker", false)], true),
    ]
}

/// The kind a framework manifest declares.
pub fn kind_from_manifest(text: &str, file: &Path) -> Result<KatibKind, KatibError> {
    let model = manifest::parse(text, file)?;
    Ok(KatibKind {
        group: model.group.clone(),
        version: model.version.clone(),
        kind: model.kind.clone(),
        replica_specs_field: model.replica_specs_field.clone(),
        container: model.container.clone(),
        roles: model.roles.iter().map(|r| (r.name.clone(), r.master)).collect(),
        master_index_zero: model.master_index_zero,
    })
}

/// A generated template and the `trialResources` entry its kind needs.
#[derive(Debug, Clone)]
pub struct Generated {
    pub trial_resource: String,
    pub trial_template: Value,
}

/// The trial template of the kind a manifest declares.
pub fn template_from_manifest(text: &str, file: &Path) -> Result<Generated, KatibError> {
    let kind = kind_from_manifest(text, file)?;
    Ok(Generated {
        trial_resource: kind.trial_resource(),
        trial_template: kind.trial_template(),
    })
}

/// The trial template of a bundled kind, named as in its `kind` (case-insensitive).
pub fn template_for_kind(name: &str) -> Result<Generated, KatibError> {
    let kinds = bundled();
    let kind = kinds.iter().find(|k| k.kind.eq_ignore_ascii_case(name)).ok_or_else(|| {
        let known: Vec<&str> = kinds.iter().map(|k| k.kind.as_str()).collect();
        field(
            "kind",
            format!(
                "unknown kind `{name}`; bundled: {}; for a kind of your own pass its manifest with -f kfop.yaml",
                known.join(", ")
            ),
        )
    })?;
    Ok(Generated {
        trial_resource: kind.trial_resource(),
        trial_template: kind.trial_template(),
    })
}

/// Checks an Experiment's `spec.trialTemplate.trialSpec` and `primaryPodLabels` against `kinds`:
/// the kind must be one of them (at its apiVersion), every primary-pod label one that some pod
/// of the kind carries, the primary container one of its template's containers. Katib itself
/// accepts all of these and then never judges the Trial (an unwatched kind) or never finds its
/// primary pod; the error names the field.
pub fn check_trial_template(experiment: &Value, kinds: &[KatibKind]) -> Result<KatibKind, KatibError> {
    let template = &experiment["spec"]["trialTemplate"];
    let spec = &template["trialSpec"];
    let kind_name = spec["kind"].as_str().unwrap_or_default();
    let api_version = spec["apiVersion"].as_str().unwrap_or_default();
    let kind = kinds
        .iter()
        .find(|k| k.kind == kind_name && format!("{}/{}", k.group, k.version) == api_version)
        .ok_or_else(|| {
            let known: Vec<String> = kinds
                .iter()
                .map(|k| format!("{}/{} {}", k.group, k.version, k.kind))
                .collect();
            field(
                "spec.trialTemplate.trialSpec.kind",
                format!(
                    "`{api_version} {kind_name}` is not a kind kfop serves here (known: {}); \
                     apply its framework first and add it to katib-config's trialResources",
                    known.join(", ")
                ),
            )
        })?;
    let role_specs = &spec["spec"][&kind.replica_specs_field];
    if !role_specs.is_object() {
        return Err(field(
            &format!("spec.trialTemplate.trialSpec.spec.{}", kind.replica_specs_field),
            format!("a {} holds its roles here", kind.kind),
        ));
    }
    let primary: BTreeMap<String, String> = match &template["primaryPodLabels"] {
        Value::Null => BTreeMap::new(),
        labels => serde_json::from_value(labels.clone()).map_err(|e| {
            field(
                "spec.trialTemplate.primaryPodLabels",
                format!("not a map of strings: {e}"),
            )
        })?,
    };
    if primary.is_empty() {
        return Err(field(
            "spec.trialTemplate.primaryPodLabels",
            format!(
                "missing: without it Katib treats every pod of the job as primary; for {} use {:?}",
                kind.kind,
                kind.primary_pod_labels()
            ),
        ));
    }
    let mut template_labels = BTreeMap::new();
    let mut containers = Vec::new();
    if let Some(roles) = role_specs.as_object() {
        for role in roles.values() {
            let pod = &role["template"];
            if let Ok(labels) =
                serde_json::from_value::<BTreeMap<String, String>>(pod["metadata"]["labels"].clone())
            {
                template_labels.extend(labels);
            }
            for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
                containers.extend(c["name"].as_str().map(str::to_owned));
            }
        }
    }
    kind.labels_match_some_pod(&primary, &template_labels)
        .map_err(|m| field("spec.trialTemplate.primaryPodLabels", m))?;
    let container = template["primaryContainerName"].as_str().unwrap_or_default();
    if !containers.iter().any(|c| c == container) {
        return Err(field(
            "spec.trialTemplate.primaryContainerName",
            format!("`{container}` is none of the template's containers {containers:?}"),
        ));
    }
    Ok(kind.clone())
}

/// The name of the policy [`admission_policy`] writes, and of its binding.
pub const POLICY_NAME: &str = "kfop-katib-trial-templates";

/// A ValidatingAdmissionPolicy and its binding with which the API server refuses, for every
/// namespace, an Experiment whose `trialTemplate.trialSpec` names a kind of a group kfop serves
/// that is none of `kinds`, or one of `kinds` with no `primaryPodLabels` (Katib defaults them for
/// the Kubeflow kinds it knows, before validation), or a `job-role` other than `master`. The
/// message names the field; the refused Experiment is never stored, so nothing of it is left.
pub fn admission_policy(kinds: &[KatibKind]) -> Vec<Value> {
    let quote = |s: &str| format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"));
    // kfop's other Kubeflow kinds, which have no template here but run as Trials all the same.
    let others = [
        "kubeflow.org/v1 MPIJob",
        "kubeflow.org/v2beta1 MPIJob",
        "kubeflow.org/v1 MXJob",
    ];
    let mut known: Vec<String> = kinds
        .iter()
        .map(|k| quote(&format!("{}/{} {}", k.group, k.version, k.kind)))
        .collect();
    known.extend(others.iter().map(|k| quote(k)));
    let mut groups: Vec<String> = kinds.iter().map(|k| quote(&format!("{}/", k.group))).collect();
    groups.sort();
    groups.dedup();
    let mut described: Vec<String> = kinds
        .iter()
        .map(|k| format!("{}/{} {}", k.group, k.version, k.kind))
        .collect();
    described.extend(others.iter().map(|k| (*k).to_owned()));
    json!([
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": { "name": POLICY_NAME },
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": { "resourceRules": [{
                    "apiGroups": ["kubeflow.org"],
                    "apiVersions": ["v1beta1"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": ["experiments"],
                }]},
                "matchConditions": [{
                    "name": "has-trial-spec",
                    "expression": "has(object.spec) && has(object.spec.trialTemplate) && has(object.spec.trialTemplate.trialSpec)",
                }],
                "variables": [
                    { "name": "spec", "expression": "object.spec.trialTemplate.trialSpec" },
                    { "name": "kind", "expression": "string(variables.spec.apiVersion) + ' ' + string(variables.spec.kind)" },
                    { "name": "ours", "expression": format!("[{}].exists(g, string(variables.spec.apiVersion).startsWith(g))", groups.join(", ")) },
                    { "name": "known", "expression": format!("variables.kind in [{}]", known.join(", ")) },
                    { "name": "labels", "expression": "has(object.spec.trialTemplate.primaryPodLabels) ? object.spec.trialTemplate.primaryPodLabels : {}" },
                ],
                "validations": [
                    {
                        "expression": "!variables.ours || variables.known",
                        "messageExpression": format!(
                            "'spec.trialTemplate.trialSpec.kind: ' + variables.kind + ' is not a kind kfop serves here (known: {}); apply its framework first and add it to katib-config trialResources'",
                            described.join(", ")
                        ),
                        "reason": "Invalid",
                    },
                    {
                        "expression": "!variables.known || size(variables.labels) > 0",
                        "messageExpression": "'spec.trialTemplate.primaryPodLabels: required for ' + variables.kind + ' (kfop katib-template prints them): without it Katib treats every pod of the job as primary'",
                        "reason": "Invalid",
                    },
                    {
                        "expression": format!("!variables.known || !('{JOB_ROLE}' in variables.labels) || string(variables.labels['{JOB_ROLE}']) == 'master'"),
                        "messageExpression": format!("'spec.trialTemplate.primaryPodLabels: no pod of ' + variables.kind + ' carries {JOB_ROLE}=' + string(variables.labels['{JOB_ROLE}'])"),
                        "reason": "Invalid",
                    },
                ],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": { "name": POLICY_NAME },
            "spec": { "policyName": POLICY_NAME, "validationActions": ["Deny"] },
        },
    ])
    .as_array()
    .cloned()
    .unwrap_or_default()
}

fn read(path: &Path) -> Result<String, KatibError> {
    std::fs::read_to_string(path).map_err(|source| KatibError::Read {
        path: path.to_owned(),
        source,
    })
}

/// What `kfop katib-template` prints.
pub fn run(args: &KatibTemplateArgs) -> Result<String, KatibError> {
    let manifest_kind = match &args.file {
        Some(file) => Some(kind_from_manifest(&read(file)?, file)?),
        None => None,
    };
    if args.policy {
        let mut kinds = bundled();
        kinds.extend(manifest_kind);
        let mut text = String::new();
        for object in admission_policy(&kinds) {
            let yaml = serde_saphyr::to_string(&object).map_err(|e| field("policy", e.to_string()))?;
            text.push_str("---\n");
            text.push_str(&yaml);
        }
        return Ok(text);
    }
    if let Some(path) = &args.check {
        let text = read(path)?;
        let experiment: Value = serde_saphyr::from_str(&text).map_err(|e| KatibError::Yaml {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        let mut kinds = bundled();
        kinds.extend(manifest_kind);
        let kind = check_trial_template(&experiment, &kinds)?;
        return Ok(format!(
            "{}: the trialTemplate runs {} (katib-config trialResources: {})",
            path.display(),
            kind.kind,
            kind.trial_resource()
        ));
    }
    let generated = match (&args.kind, manifest_kind) {
        (_, Some(kind)) => Generated {
            trial_resource: kind.trial_resource(),
            trial_template: kind.trial_template(),
        },
        (Some(name), None) => template_for_kind(name)?,
        (None, None) => return Err(KatibError::NoKind),
    };
    let yaml = serde_saphyr::to_string(&json!({ "trialTemplate": generated.trial_template }))
        .map_err(|e| field("trialTemplate", e.to_string()))?;
    Ok(format!(
        "# katib-config: add {} to init.controller.trialResources\n# Experiment spec:\n{yaml}",
        generated.trial_resource
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = "apiVersion: kfop.dev/v1alpha1
kind: Framework
metadata:
  name: rttrain
spec:
  group: katib-test.kfop.dev
  version: v1
  kind: RtTrainJob
  container: {name: trainer, portName: trainer-port, port: 29500}
  roles:
    - name: Worker
      restartPolicy: Never
  masterPods: indexZero
  status: {rule: leaderOrFollowers, followers: Worker}
";

    fn experiment(template: Value) -> Value {
        json!({ "spec": { "trialTemplate": template } })
    }

    #[test]
    fn a_manifest_gives_a_template_katib_accepts_for_its_kind() {
        let generated = template_from_manifest(MANIFEST, Path::new("kfop.yaml")).unwrap();
        assert_eq!(generated.trial_resource, "RtTrainJob.v1.katib-test.kfop.dev");
        let t = &generated.trial_template;
        assert_eq!(t["primaryContainerName"], "trainer");
        assert_eq!(t["primaryPodLabels"], json!({ JOB_ROLE: "master" }));
        assert_eq!(t["successCondition"], SUCCESS_CONDITION);
        assert_eq!(t["failureCondition"], FAILURE_CONDITION);
        assert_eq!(t["trialSpec"]["apiVersion"], "katib-test.kfop.dev/v1");
        let worker = &t["trialSpec"]["spec"]["rttrainReplicaSpecs"]["Worker"];
        assert_eq!(worker["template"]["spec"]["containers"][0]["name"], "trainer");
        let kind = kind_from_manifest(MANIFEST, Path::new("kfop.yaml")).unwrap();
        assert_eq!(
            check_trial_template(&experiment(t.clone()), &[kind])
                .unwrap()
                .kind,
            "RtTrainJob"
        );
    }

    #[test]
    fn a_kind_without_masters_takes_pod_zero_of_its_first_role() {
        let manifest = MANIFEST.replace("  masterPods: indexZero\n", "");
        let kind = kind_from_manifest(&manifest, Path::new("kfop.yaml")).unwrap();
        assert_eq!(
            kind.primary_pod_labels(),
            BTreeMap::from([
                (REPLICA_TYPE.to_owned(), "worker".to_owned()),
                (REPLICA_INDEX.to_owned(), "0".to_owned())
            ])
        );
        let mut t = kind.trial_template();
        assert!(check_trial_template(&experiment(t.clone()), std::slice::from_ref(&kind)).is_ok());
        // job-role=master names no pod of this kind.
        t["primaryPodLabels"] = json!({ JOB_ROLE: "master" });
        let error = check_trial_template(&experiment(t), &[kind])
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("spec.trialTemplate.primaryPodLabels: no pod of RtTrainJob"),
            "{error}"
        );
    }

    #[test]
    fn every_bundled_template_checks() {
        let kinds = bundled();
        for kind in &kinds {
            let generated = template_for_kind(&kind.kind.to_lowercase()).unwrap();
            assert_eq!(generated.trial_resource, format!("{}.v1.kubeflow.org", kind.kind));
            check_trial_template(&experiment(generated.trial_template), &kinds).unwrap();
        }
    }

    #[test]
    fn the_policy_knows_every_kind_and_names_the_fields() {
        let mut kinds = bundled();
        kinds.push(kind_from_manifest(MANIFEST, Path::new("kfop.yaml")).unwrap());
        let objects = admission_policy(&kinds);
        assert_eq!(objects.len(), 2);
        let policy = &objects[0]["spec"];
        let known = policy["variables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == "known")
            .unwrap();
        let known = known["expression"].as_str().unwrap();
        assert!(
            known.contains("'katib-test.kfop.dev/v1 RtTrainJob'")
                && known.contains("'kubeflow.org/v1 PyTorchJob'")
        );
        let messages: Vec<&str> = policy["validations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["messageExpression"].as_str().unwrap())
            .collect();
        assert!(messages[0].starts_with("'spec.trialTemplate.trialSpec.kind: '"));
        assert!(messages[1].starts_with("'spec.trialTemplate.primaryPodLabels: "));
        assert_eq!(objects[1]["spec"]["policyName"], POLICY_NAME);
    }

    #[test]
    fn bad_input_is_refused_with_the_field_named() {
        let error = template_for_kind("FooJob").unwrap_err().to_string();
        assert!(error.starts_with("kind: unknown kind `FooJob`"), "{error}");

        let kinds = bundled();
        let good = template_for_kind("PyTorchJob").unwrap().trial_template;
        let mut unknown = good.clone();
        unknown["trialSpec"]["kind"] = json!("FooJob");
        let error = check_trial_template(&experiment(unknown), &kinds)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("spec.trialTemplate.trialSpec.kind: `kubeflow.org/v1 FooJob`"),
            "{error}"
        );

        let mut missing = good.clone();
        missing.as_object_mut().unwrap().remove("primaryPodLabels");
        let error = check_trial_template(&experiment(missing), &kinds)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("spec.trialTemplate.primaryPodLabels: missing"),
            "{error}"
        );

        let mut wrong_role = good.clone();
        wrong_role["primaryPodLabels"] = json!({ REPLICA_TYPE: "chief" });
        let error = check_trial_template(&experiment(wrong_role), &kinds)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("no pod of PyTorchJob carries training.kubeflow.org/replica-type=chief"),
            "{error}"
        );

        let mut container = good;
        container["primaryContainerName"] = json!("trainer");
        let error = check_trial_template(&experiment(container), &kinds)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("spec.trialTemplate.primaryContainerName: `trainer`"),
            "{error}"
        );
    }
}
