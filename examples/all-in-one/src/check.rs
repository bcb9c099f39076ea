//! `kfop-operator check`: whether a cluster is ready for the operator, one line per finding
//! with its fix. It looks at what a platform team gets wrong when it installs the operator or
//! takes over from Kubeflow: CRDs missing, outdated or still Kubeflow's own; the MPIJob
//! conversion webhook out of the API server's reach; RBAC not granted; a Kubeflow operator
//! still running the same kinds. The decisions are pure functions of what was read
//! ([`crd_finding`], [`kubeflow_operator`], [`denied`]), unit-tested here; `run` does the reads.
use std::collections::{BTreeMap, BTreeSet};

use futures::{StreamExt, TryStreamExt};
use kfop_runtime::k8s_openapi::api::apps::v1::Deployment;
use kfop_runtime::k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kfop_runtime::k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kfop_runtime::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kfop_runtime::kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kfop_runtime::kube::{Client, ResourceExt};
use kfop_runtime::serde_json::{self, json};

use crate::schemes::Scheme;

/// The command that installs kfop's CRDs over whatever is there.
const APPLY_CRDS: &str = "kfop-operator crds | kubectl apply --server-side --force-conflicts -f - \
                          (or install the chart, whose crds/ are the same)";

/// Kubeflow's CRDs are made by controller-gen, which marks each with its version.
const CONTROLLER_GEN: &str = "controller-gen.kubebuilder.io/version";

/// The subject of the conversion check.
const DRY_RUN: &str = "MPIJob kubeflow.org/v1 create (dry run, through the conversion webhook)";

/// Requests in flight for the access reviews.
const REVIEWS_IN_FLIGHT: usize = 16;

/// Why the check itself could not run (a finding is not an error).
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("reading {what}: {source}")]
    Kube {
        what: String,
        source: kfop_runtime::kube::Error,
    },
    #[error("the operator's ClusterRole (from `kfop-operator deploy`) does not parse: {0}")]
    Rules(String),
}

/// Something that keeps the operator from working, with what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What was checked, e.g. `CRD mpijobs.kubeflow.org`.
    pub subject: String,
    pub problem: String,
    pub fix: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FAIL {}: {}; fix: {}", self.subject, self.problem, self.fix)
    }
}

/// What `check` found: the subjects that passed and the findings.
#[derive(Debug, Default)]
pub struct Report {
    pub passed: Vec<String>,
    pub findings: Vec<Finding>,
}

impl Report {
    fn record(&mut self, subject: String, outcome: Result<(), Finding>) {
        match outcome {
            Ok(()) => self.passed.push(subject),
            Err(finding) => self.findings.push(finding),
        }
    }

    /// One line per subject: `ok <subject>` or `FAIL <subject>: <problem>; fix: <fix>`.
    pub fn lines(&self) -> Vec<String> {
        self.passed
            .iter()
            .map(|s| format!("ok   {s}"))
            .chain(self.findings.iter().map(Finding::to_string))
            .collect()
    }
}

/// Where and as whom to check.
#[derive(Clone)]
pub struct Target {
    /// Reads the cluster (CRDs, Deployments) and makes the dry-run create.
    pub client: Client,
    /// Asks the access reviews: the operator's own identity (in cluster, or impersonated).
    pub reviewer: Client,
    /// The namespace the operator watches (`None`: all); the dry-run job goes there or to
    /// `default`.
    pub namespace: Option<String>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// Runs every check for the `enabled` kinds.
pub async fn run(target: &Target, enabled: &BTreeSet<Scheme>) -> Result<Report, CheckError> {
    let mut report = Report::default();
    let crds: Api<CustomResourceDefinition> = Api::all(target.client.clone());
    for ours in crate::crds::all(enabled) {
        let name = ours.name_any();
        let installed = crds.get_opt(&name).await.map_err(|source| CheckError::Kube {
            what: format!("CRD {name}"),
            source,
        })?;
        report.record(format!("CRD {name}"), crd_finding(&ours, installed.as_ref()));
    }
    if enabled.contains(&Scheme::MpiJob) {
        report.record(DRY_RUN.to_owned(), mpijob_v1_dry_run(target).await);
    }
    for outcome in access(target, enabled).await? {
        report.record(outcome.0, outcome.1);
    }
    let deployments: Api<Deployment> = Api::all(target.client.clone());
    match deployments.list(&ListParams::default()).await {
        Ok(list) => {
            let running: Vec<Finding> = list
                .items
                .iter()
                .filter_map(|d| kubeflow_operator(d, enabled))
                .collect();
            let subject = "no Kubeflow operator runs the same kinds".to_owned();
            if running.is_empty() {
                report.passed.push(subject);
            }
            report.findings.extend(running);
        }
        Err(e) => report.findings.push(Finding {
            subject: "Kubeflow operators".to_owned(),
            problem: format!("cannot list Deployments to look for them ({e})"),
            fix: "run the check as a user who may list Deployments in every namespace".to_owned(),
        }),
    }
    Ok(report)
}

/// Whether the installed CRD is kfop's, as this operator would install it.
pub fn crd_finding(
    ours: &CustomResourceDefinition,
    installed: Option<&CustomResourceDefinition>,
) -> Result<(), Finding> {
    let finding = |problem: String| Finding {
        subject: format!("CRD {}", ours.name_any()),
        problem,
        fix: APPLY_CRDS.to_owned(),
    };
    let Some(installed) = installed else {
        return Err(finding("not installed".to_owned()));
    };
    if let Some(version) = installed.annotations().get(CONTROLLER_GEN) {
        return Err(finding(format!(
            "still Kubeflow's own CRD (controller-gen {version}), which lacks what kfop serves"
        )));
    }
    let theirs: BTreeMap<&str, _> = installed
        .spec
        .versions
        .iter()
        .map(|v| (v.name.as_str(), v))
        .collect();
    let mut differences = Vec::new();
    for version in &ours.spec.versions {
        let Some(installed) = theirs.get(version.name.as_str()) else {
            differences.push(format!("version {} is not served", version.name));
            continue;
        };
        if installed.served != version.served || installed.storage != version.storage {
            differences.push(format!(
                "version {} is served or stored differently",
                version.name
            ));
        }
        if serde_json::to_value(&installed.schema).ok() != serde_json::to_value(&version.schema).ok() {
            differences.push(format!("version {} has another schema", version.name));
        }
    }
    for name in theirs.keys() {
        if !ours.spec.versions.iter().any(|v| v.name == *name) {
            differences.push(format!("version {name} is not kfop's"));
        }
    }
    if differences.is_empty() {
        Ok(())
    } else {
        Err(finding(format!(
            "not current for this operator ({})",
            differences.join(", ")
        )))
    }
}

/// A `kubeflow.org/v1` MPIJob created with `dryRun`: the API server converts it to the stored
/// `v2beta1` through the webhook, so this fails exactly when users' v1 creates would.
async fn mpijob_v1_dry_run(target: &Target) -> Result<(), Finding> {
    let namespace = target.namespace.as_deref().unwrap_or("default");
    let resource = ApiResource {
        group: "kubeflow.org".into(),
        version: "v1".into(),
        api_version: "kubeflow.org/v1".into(),
        kind: "MPIJob".into(),
        plural: "mpijobs".into(),
    };
    let template = json!({"spec": {"containers": [{"name": "mpi", "image": "kfop-check"}]}});
    let job: Result<DynamicObject, _> = serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1", "kind": "MPIJob",
        "metadata": {"generateName": "kfop-check-"},
        "spec": {"mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": template},
            "Worker": {"replicas": 1, "template": template},
        }},
    }));
    let subject = DRY_RUN.to_owned();
    let job = job.map_err(|e| Finding {
        subject: subject.clone(),
        problem: e.to_string(),
        fix: "report this as a bug".to_owned(),
    })?;
    let api: Api<DynamicObject> = Api::namespaced_with(target.client.clone(), namespace, &resource);
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match api.create(&params, &job).await {
        Ok(_) => Ok(()),
        Err(kfop_runtime::kube::Error::Api(status)) if status.code == 404 => Err(Finding {
            subject,
            problem: "kubeflow.org/v1 MPIJobs are not served".to_owned(),
            fix: format!("install kfop's MPIJob CRD, which serves v1 and v2beta1: {APPLY_CRDS}"),
        }),
        Err(kfop_runtime::kube::Error::Api(status)) if status.code == 403 => Err(Finding {
            subject,
            problem: format!("not allowed to try in namespace {namespace} ({})", status.message),
            fix: "run the check as a user who may create MPIJobs (nothing is stored: it is a dry run)"
                .to_owned(),
        }),
        Err(kfop_runtime::kube::Error::Api(status)) if status.message.contains("conversion webhook") => {
            Err(Finding {
                subject,
                problem: format!("the API server cannot convert it ({})", status.message),
                fix: format!(
                    "in cluster, the Service {}/{} needs a ready operator pod; out of cluster, run the \
                 operator with --webhook-url=https://<host:port the API server reaches>",
                    crate::deploy::NAMESPACE,
                    crate::deploy::webhook_service()
                ),
            })
        }
        Err(e) => Err(Finding {
            subject,
            problem: e.to_string(),
            fix: "see the API server's message".to_owned(),
        }),
    }
}

/// One question to the API server's authorizer.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Ask {
    group: String,
    resource: String,
    verb: String,
    name: Option<String>,
}

/// Every (group, resource, verb, name) the operator's ClusterRole grants.
fn asks(rules: &[PolicyRule]) -> Vec<Ask> {
    let mut asks = Vec::new();
    for rule in rules {
        let names: Vec<Option<String>> = match &rule.resource_names {
            Some(names) if !names.is_empty() => names.iter().cloned().map(Some).collect(),
            _ => vec![None],
        };
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                for verb in &rule.verbs {
                    for name in &names {
                        asks.push(Ask {
                            group: group.clone(),
                            resource: resource.clone(),
                            verb: verb.clone(),
                            name: name.clone(),
                        });
                    }
                }
            }
        }
    }
    asks
}

/// The rules of the ClusterRole `kfop-operator deploy` installs for `enabled`.
fn operator_rules(enabled: &BTreeSet<Scheme>) -> Result<Vec<PolicyRule>, CheckError> {
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&crate::deploy::rbac(enabled))
        .map_err(|e| CheckError::Rules(e.to_string()))?;
    let role = docs
        .into_iter()
        .find(|d| d["kind"] == "ClusterRole")
        .ok_or_else(|| CheckError::Rules("no ClusterRole".to_owned()))?;
    let role: ClusterRole = serde_json::from_value(role).map_err(|e| CheckError::Rules(e.to_string()))?;
    Ok(role.rules.unwrap_or_default())
}

/// Asks, per verb and resource the operator needs, whether the reviewer's identity may.
async fn access(
    target: &Target,
    enabled: &BTreeSet<Scheme>,
) -> Result<Vec<(String, Result<(), Finding>)>, CheckError> {
    let asks = asks(&operator_rules(enabled)?);
    let reviews: Api<SelfSubjectAccessReview> = Api::all(target.reviewer.clone());
    let answers: Vec<(Ask, bool)> = futures::stream::iter(asks)
        .map(|ask| {
            let reviews = reviews.clone();
            let namespace = target.namespace.clone();
            async move {
                let (resource, subresource) = match ask.resource.split_once('/') {
                    Some((r, s)) => (r.to_owned(), Some(s.to_owned())),
                    None => (ask.resource.clone(), None),
                };
                let review = SelfSubjectAccessReview {
                    spec: SelfSubjectAccessReviewSpec {
                        resource_attributes: Some(ResourceAttributes {
                            group: Some(ask.group.clone()),
                            resource: Some(resource),
                            subresource,
                            verb: Some(ask.verb.clone()),
                            name: ask.name.clone(),
                            namespace,
                            ..ResourceAttributes::default()
                        }),
                        ..SelfSubjectAccessReviewSpec::default()
                    },
                    ..SelfSubjectAccessReview::default()
                };
                let answer = reviews
                    .create(&PostParams::default(), &review)
                    .await
                    .map_err(|source| CheckError::Kube {
                        what: "a SelfSubjectAccessReview".to_owned(),
                        source,
                    })?;
                let allowed = answer.status.is_some_and(|s| s.allowed);
                Ok::<_, CheckError>((ask, allowed))
            }
        })
        .buffer_unordered(REVIEWS_IN_FLIGHT)
        .try_collect()
        .await?;
    Ok(denied(answers, target.namespace.as_deref()))
}

/// The access reviews' answers as one outcome per API group and resource.
fn denied(answers: Vec<(Ask, bool)>, namespace: Option<&str>) -> Vec<(String, Result<(), Finding>)> {
    let mut by_resource: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for (ask, allowed) in answers {
        let refused = by_resource.entry((ask.group, ask.resource)).or_default();
        if !allowed {
            let verb = match ask.name {
                Some(name) => format!("{} {name}", ask.verb),
                None => ask.verb,
            };
            refused.push(verb);
        }
    }
    let scope = namespace.map_or_else(|| "cluster-wide".to_owned(), |ns| format!("in namespace {ns}"));
    by_resource
        .into_iter()
        .map(|((group, resource), mut refused)| {
            let group = if group.is_empty() {
                "core".to_owned()
            } else {
                group
            };
            let subject = format!("RBAC {resource} ({group}) {scope}");
            refused.sort();
            let outcome = if refused.is_empty() {
                Ok(())
            } else {
                Err(Finding {
                    subject: subject.clone(),
                    problem: format!("may not {}", refused.join(", ")),
                    fix: format!(
                        "bind the ClusterRole {} (the chart's, or `kfop-operator deploy`) to the \
                         identity the operator runs as",
                        crate::deploy::NAME
                    ),
                })
            };
            (subject, outcome)
        })
        .collect()
}

/// A Deployment running Kubeflow's training-operator or mpi-operator for any of `enabled`.
pub fn kubeflow_operator(deployment: &Deployment, enabled: &BTreeSet<Scheme>) -> Option<Finding> {
    let spec = &deployment.spec;
    if spec.replicas == Some(0) {
        return None;
    }
    let pod = spec.template.spec.as_ref()?;
    let (image, kinds) = pod.containers.iter().find_map(|c| {
        let image = c.image.as_deref()?;
        let repository = image.split(['@', ':']).next().unwrap_or(image);
        let name = repository.rsplit('/').next().unwrap_or(repository);
        let kinds: BTreeSet<Scheme> = match name {
            "training-operator" => {
                let chosen = c
                    .args
                    .iter()
                    .chain(c.command.iter())
                    .flatten()
                    .filter_map(|a| a.strip_prefix("--enable-scheme="))
                    .map(str::to_owned)
                    .collect::<Vec<_>>();
                if chosen.is_empty() {
                    Scheme::ALL.iter().map(|(_, s)| *s).collect()
                } else {
                    crate::schemes::parse(&chosen).ok()?
                }
            }
            "mpi-operator" => [Scheme::MpiJob].into(),
            _ => return None,
        };
        Some((image.to_owned(), kinds))
    })?;
    let shared: Vec<String> = kinds
        .intersection(enabled)
        .map(|s| crate::samples::api_resource(*s).kind)
        .collect();
    if shared.is_empty() {
        return None;
    }
    let (namespace, name) = (deployment.namespace().unwrap_or_default(), deployment.name_any());
    Some(Finding {
        subject: format!("Deployment {namespace}/{name}"),
        problem: format!(
            "Kubeflow's operator ({image}) still runs {}, which two operators would fight over",
            shared.join(", ")
        ),
        fix: format!(
            "kubectl -n {namespace} scale deployment {name} --replicas=0 (or leave those kinds out \
             of its --enable-scheme)"
        ),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn all() -> BTreeSet<Scheme> {
        crate::schemes::parse(&[]).unwrap()
    }

    #[test]
    fn a_crd_is_missing_kubeflows_outdated_or_current() {
        let ours = crate::crds::of(Scheme::TfJob);
        let missing = crd_finding(&ours, None).unwrap_err();
        assert_eq!(
            missing.to_string(),
            format!("FAIL CRD tfjobs.kubeflow.org: not installed; fix: {APPLY_CRDS}")
        );
        assert_eq!(crd_finding(&ours, Some(&ours)), Ok(()));

        let mut kubeflows = ours.clone();
        kubeflows
            .annotations_mut()
            .insert(CONTROLLER_GEN.to_owned(), "v0.14.0".to_owned());
        let problem = crd_finding(&ours, Some(&kubeflows)).unwrap_err().problem;
        assert!(
            problem.contains("Kubeflow's own CRD (controller-gen v0.14.0)"),
            "{problem}"
        );

        let mut outdated = ours.clone();
        outdated.spec.versions[0].schema = None;
        outdated.spec.versions[0].name = "v1".to_owned();
        let mut extra = outdated.spec.versions[0].clone();
        extra.name = "v2".to_owned();
        outdated.spec.versions.push(extra);
        let problem = crd_finding(&ours, Some(&outdated)).unwrap_err().problem;
        assert_eq!(
            problem,
            "not current for this operator (version v1 has another schema, version v2 is not kfop's)"
        );

        let mpi = crate::crds::of(Scheme::MpiJob);
        let v2beta1_only = Scheme::MpiJob.crd_without_conversion();
        let problem = crd_finding(&mpi, Some(&v2beta1_only)).unwrap_err().problem;
        assert!(problem.contains("version v1 is not served"), "{problem}");
    }

    #[test]
    fn the_rules_asked_are_the_cluster_roles() {
        let asks = asks(&operator_rules(&all()).unwrap());
        let has = |group: &str, resource: &str, verb: &str, name: Option<&str>| {
            asks.contains(&Ask {
                group: group.into(),
                resource: resource.into(),
                verb: verb.into(),
                name: name.map(Into::into),
            })
        };
        assert!(has("", "pods", "create", None));
        assert!(has("kubeflow.org", "tfjobs/status", "patch", None));
        assert!(has(
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            "patch",
            Some("mpijobs.kubeflow.org")
        ));
        assert!(!has("", "pods", "update", None));
        // Without MPIJob the operator needs no exec into pods.
        let tf = crate::schemes::parse(&["tfjob".to_owned()]).unwrap();
        assert!(!asks_of(&tf).iter().any(|a| a.resource == "pods/exec"));
    }

    fn asks_of(enabled: &BTreeSet<Scheme>) -> Vec<Ask> {
        asks(&operator_rules(enabled).unwrap())
    }

    #[test]
    fn denials_are_one_finding_per_resource() {
        let ask = |resource: &str, verb: &str| Ask {
            group: String::new(),
            resource: resource.into(),
            verb: verb.into(),
            name: None,
        };
        let outcomes = denied(
            vec![
                (ask("pods", "create"), false),
                (ask("pods", "delete"), false),
                (ask("pods", "get"), true),
                (ask("services", "get"), true),
            ],
            None,
        );
        assert_eq!(outcomes.len(), 2);
        let (subject, pods) = &outcomes[0];
        assert_eq!(subject, "RBAC pods (core) cluster-wide");
        assert_eq!(pods.as_ref().unwrap_err().problem, "may not create, delete");
        assert_eq!(outcomes[1].1, Ok(()));
    }

    fn deployment(image: &str, args: &[&str], replicas: i32) -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "training-operator", "namespace": "kubeflow"},
            "spec": {"replicas": replicas, "selector": {},
                     "template": {"spec": {"containers": [{"name": "m", "image": image, "args": args}]}}},
        }))
        .unwrap()
    }

    #[test]
    fn kubeflows_operators_are_found_by_image_and_enabled_kinds() {
        let enabled = all();
        let training = deployment("kubeflow/training-operator:v1-855e096", &[], 1);
        let finding = kubeflow_operator(&training, &enabled).unwrap();
        assert_eq!(finding.subject, "Deployment kubeflow/training-operator");
        assert!(
            finding.problem.contains("TFJob, PyTorchJob"),
            "{}",
            finding.problem
        );
        assert!(
            finding
                .fix
                .starts_with("kubectl -n kubeflow scale deployment training-operator --replicas=0")
        );
        // Scaled to zero, or running only kinds kfop does not run, or another image: no finding.
        assert!(kubeflow_operator(&deployment("kubeflow/training-operator:v1", &[], 0), &enabled).is_none());
        let tf_only = deployment("kubeflow/training-operator:v1", &["--enable-scheme=tfjob"], 1);
        let pytorch = crate::schemes::parse(&["pytorchjob".to_owned()]).unwrap();
        assert!(kubeflow_operator(&tf_only, &pytorch).is_none());
        assert!(kubeflow_operator(&tf_only, &enabled).is_some());
        assert!(kubeflow_operator(&deployment("example/kfop-operator:0.1.0", &[], 1), &enabled).is_none());
        let mpi = deployment("mpioperator/mpi-operator:0.6.0", &[], 1);
        assert!(
            kubeflow_operator(&mpi, &enabled)
                .unwrap()
                .problem
                .contains("MPIJob")
        );
    }
}
