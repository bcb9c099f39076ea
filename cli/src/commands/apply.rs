//! `kfop apply -f kfop.yaml`: hands a manifest-only framework to a running all-in-one operator,
//! which loads run-time frameworks from cluster-scoped `frameworks.kfop.dev` objects. The
//! manifest already is such an object, so it is validated here and sent as written.
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use kfop_runtime::serde_json::{self, Value};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::config::{InferConfigError, KubeConfigOptions, Kubeconfig, KubeconfigError};
use kube::{Client, Config};

use crate::manifest::{self, API_VERSION, KIND, ManifestError};

/// The API group of `Framework` objects (the manifest's `apiVersion` is `<group>/<version>`).
pub const GROUP: &str = "kfop.dev";
/// The API version of `Framework` objects.
pub const VERSION: &str = "v1alpha1";
/// The resource name of `Framework` objects.
pub const PLURAL: &str = "frameworks";
/// The field manager of the server-side apply, so a re-apply owns (and may drop) what the last
/// one set.
pub const FIELD_MANAGER: &str = "kfop";
/// How often `--wait` reads the object again.
const POLL: Duration = Duration::from_secs(1);

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The framework manifest to apply (a kfop.yaml, e.g. from `kfop new --no-code`)
    #[arg(short = 'f', long = "filename", value_name = "PATH")]
    file: PathBuf,
    /// The kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, or the in-cluster account)
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
    /// Wait up to SECONDS for the operator to report the framework Ready; fail if it rejects it
    #[arg(long, value_name = "SECONDS")]
    wait: Option<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("{path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error("{path}: not a Kubernetes object: {source}")]
    Object {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig { path: PathBuf, source: KubeconfigError },
    #[error("no cluster to apply to: {0}; pass --kubeconfig or set KUBECONFIG")]
    Infer(#[source] InferConfigError),
    #[error("building a Kubernetes client: {}", chain(.0))]
    Client(#[source] kube::Error),
    #[error(
        "the cluster serves no {PLURAL}.{GROUP} resource; install the all-in-one operator, \
         which loads run-time frameworks, and apply again"
    )]
    NoFrameworkResource(#[source] kube::Error),
    #[error("applying {}: {}", object_name(.name), chain(.source))]
    Apply { name: String, source: kube::Error },
    #[error("reading {} back: {}", object_name(.name), chain(.source))]
    Get { name: String, source: kube::Error },
    #[error("{} was not accepted: {message}", object_name(.name))]
    Rejected { name: String, message: String },
    #[error(
        "{} is not Ready after {seconds}s{}; is the all-in-one operator running?",
        object_name(.name),
        .last.as_ref().map(|m| format!(" ({m})")).unwrap_or_default()
    )]
    Timeout {
        name: String,
        seconds: u64,
        last: Option<String>,
    },
    #[error("starting the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// An error and its sources, `: `-joined: kube's transport errors say what failed (e.g. the
/// connection was refused) only in their sources.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let next = e.to_string();
        if !text.contains(&next) {
            text = format!("{text}: {next}");
        }
        source = e.source();
    }
    text
}

/// `framework.kfop.dev/<name>`, as kubectl names the object.
fn object_name(name: &str) -> String {
    format!("{}.{GROUP}/{name}", KIND.to_lowercase())
}

/// The `Framework` resource, which is cluster-scoped (an `Api::all_with` of it).
pub fn api_resource() -> ApiResource {
    ApiResource {
        group: GROUP.to_owned(),
        version: VERSION.to_owned(),
        api_version: API_VERSION.to_owned(),
        kind: KIND.to_owned(),
        plural: PLURAL.to_owned(),
    }
}

/// A validated manifest as the object to apply.
#[derive(Debug, Clone)]
pub struct Framework {
    pub name: String,
    pub object: DynamicObject,
}

/// Validates the manifest text as `kfop gen` does, plus what a crate-less framework cannot have,
/// and turns the YAML document into the object, unchanged: the operator reads the same fields
/// the generator does.
pub fn framework(text: &str, file: &Path) -> Result<Framework, ApplyError> {
    let manifest::Validated { model, warnings } = manifest::parse_with_warnings(text, file)?;
    for warning in &warnings {
        tracing::warn!("{warning}");
    }
    manifest::check_manifest_only(text, file)?;
    // `parse` read the same text, so this only fails for YAML a JSON value cannot hold.
    let value: Value = serde_saphyr::from_str(text).map_err(|e| manifest::syntax_error(&e, file))?;
    let object = serde_json::from_value(value).map_err(|source| ApplyError::Object {
        path: file.to_owned(),
        source,
    })?;
    Ok(Framework {
        name: model.name,
        object,
    })
}

/// What the operator has said about the framework so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// `Ready` is `True`, with its message.
    Ready(String),
    /// `Accepted` is `False`: the operator refused the manifest, with its message.
    Rejected(String),
    /// Neither yet; the `Ready` condition's message, if it has one, says why.
    Pending(Option<String>),
}

/// Reads `status.conditions` of a `Framework` object. Conditions older than `generation` (by
/// their `observedGeneration`, or the status's) are about the spec before this apply, so they
/// are ignored: a re-apply must not report the previous spec's Ready.
pub fn readiness(object: &Value, generation: Option<i64>) -> Readiness {
    let status = &object["status"];
    let stale = |observed: Option<i64>| matches!((observed, generation), (Some(o), Some(g)) if o < g);
    let status_generation = status["observedGeneration"].as_i64();
    let current = |c: &&Value| {
        let observed = c["observedGeneration"].as_i64().or(status_generation);
        !stale(observed)
    };
    let conditions: Vec<&Value> = status["conditions"]
        .as_array()
        .map(|list| list.iter().filter(current).collect())
        .unwrap_or_default();
    let find = |kind: &str| conditions.iter().find(|c| c["type"] == kind).copied();
    let message = |c: &Value| c["message"].as_str().unwrap_or_default().to_owned();
    if let Some(accepted) = find("Accepted").filter(|c| c["status"] == "False") {
        return Readiness::Rejected(message(accepted));
    }
    match find("Ready") {
        Some(ready) if ready["status"] == "True" => Readiness::Ready(message(ready)),
        Some(ready) => Readiness::Pending(Some(message(ready)).filter(|m| !m.is_empty())),
        None => Readiness::Pending(None),
    }
}

pub fn run(args: &ApplyArgs) -> Result<(), ApplyError> {
    let text = std::fs::read_to_string(&args.file).map_err(|source| ApplyError::Read {
        path: args.file.clone(),
        source,
    })?;
    // Everything that can be wrong with the file is reported before the cluster is contacted.
    let framework = framework(&text, &args.file)?;
    let runtime = tokio::runtime::Runtime::new().map_err(ApplyError::Runtime)?;
    runtime.block_on(async {
        let api: Api<DynamicObject> =
            Api::all_with(client(args.kubeconfig.as_deref()).await?, &api_resource());
        let applied = apply(&api, &framework).await?;
        say(&format!("{} applied", object_name(&framework.name)));
        if let Some(seconds) = args.wait {
            let message = wait(&api, &framework.name, applied.metadata.generation, seconds).await?;
            say(&format!("{} ready: {message}", object_name(&framework.name)));
        }
        Ok(())
    })
}

/// A client for `--kubeconfig`'s current context, or kube's default inference.
async fn client(kubeconfig: Option<&Path>) -> Result<Client, ApplyError> {
    let config = match kubeconfig {
        Some(path) => {
            let invalid = |source| ApplyError::Kubeconfig {
                path: path.to_owned(),
                source,
            };
            let file = Kubeconfig::read_from(path).map_err(invalid)?;
            Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(invalid)?
        }
        None => Config::infer().await.map_err(ApplyError::Infer)?,
    };
    Client::try_from(config).map_err(ApplyError::Client)
}

/// Server-side apply, forced: the manifest file is the source of truth for the fields it sets.
async fn apply(api: &Api<DynamicObject>, framework: &Framework) -> Result<DynamicObject, ApplyError> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(&framework.name, &params, &Patch::Apply(&framework.object))
        .await
        .map_err(|source| match &source {
            kube::Error::Api(status) if status.code == 404 => ApplyError::NoFrameworkResource(source),
            _ => ApplyError::Apply {
                name: framework.name.clone(),
                source,
            },
        })
}

/// Polls the object until the operator reports it Ready (its message) or not Accepted (an
/// error), for at most `seconds`.
async fn wait(
    api: &Api<DynamicObject>,
    name: &str,
    generation: Option<i64>,
    seconds: u64,
) -> Result<String, ApplyError> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(seconds);
    loop {
        let object = api.get(name).await.map_err(|source| ApplyError::Get {
            name: name.to_owned(),
            source,
        })?;
        // A DynamicObject always serializes (string keys, JSON values); `Null` would only read
        // as pending.
        let value = serde_json::to_value(&object).unwrap_or_default();
        let last = match readiness(&value, generation) {
            Readiness::Ready(message) => return Ok(message),
            Readiness::Rejected(message) => {
                return Err(ApplyError::Rejected {
                    name: name.to_owned(),
                    message,
                });
            }
            Readiness::Pending(last) => last,
        };
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return Err(ApplyError::Timeout {
                name: name.to_owned(),
                seconds,
                last,
            });
        }
        tokio::time::sleep(POLL.min(deadline - now)).await;
    }
}

/// The command's output proper (logs go to stderr).
fn say(text: &str) {
    let _ = writeln!(std::io::stdout(), "{text}");
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use kfop_runtime::serde_json::json;

    use super::*;

    const FILE: &str = "kfop.yaml";

    fn object_json(text: &str) -> Value {
        serde_json::to_value(framework(text, Path::new(FILE)).unwrap().object).unwrap()
    }

    #[test]
    fn the_default_manifest_is_sent_as_written() {
        let text = manifest::default_manifest("foo", "foo.example.com");
        let got = framework(&text, Path::new(FILE)).unwrap();
        assert_eq!(got.name, "foo");
        let value = serde_json::to_value(&got.object).unwrap();
        assert_eq!(value["apiVersion"], "kfop.dev/v1alpha1");
        assert_eq!(value["kind"], "Framework");
        assert_eq!(value["metadata"], json!({"name": "foo"}));
        assert_eq!(value["spec"]["group"], "foo.example.com");
        assert_eq!(value["spec"]["container"]["port"], 23456);
        assert_eq!(
            value["spec"]["roles"][0],
            json!({
                "name": "Master", "master": true, "restartPolicy": "OnFailure",
                "minReplicas": 1, "maxReplicas": 1,
            })
        );
        assert_eq!(value["spec"]["env"][0]["value"], "{host.Master.0}");
        assert_eq!(
            value["spec"]["status"],
            json!({"rule": "successRules", "success": [{"allOf": "Master"}, {"allOf": "Worker"}]})
        );
    }

    #[test]
    fn spec_fields_the_generator_only_passes_on_keep_their_json() {
        let text = manifest::default_manifest("foo", "foo.example.com")
            + "  testJob:\n    runPolicy: {backoffLimit: 2, suspend: false}\n";
        assert_eq!(
            object_json(&text)["spec"]["testJob"],
            json!({"runPolicy": {"backoffLimit": 2, "suspend": false}})
        );
    }

    #[test]
    fn an_invalid_manifest_is_the_generators_error() {
        let text =
            manifest::default_manifest("foo", "foo.example.com").replace("version: v1", "version: one");
        let err = framework(&text, Path::new(FILE)).unwrap_err();
        let expected = manifest::parse(&text, Path::new(FILE)).unwrap_err();
        assert!(
            matches!(&err, ApplyError::Manifest(e) if *e == expected),
            "{err:?}"
        );
        assert!(err.to_string().starts_with("kfop.yaml:"), "{err}");
        assert!(err.to_string().contains("spec.version"), "{err}");
    }

    #[test]
    fn hooks_are_refused_naming_the_field() {
        let text = manifest::default_manifest("foo", "foo.example.com") + "  hooks: true\n";
        let err = framework(&text, Path::new(FILE)).unwrap_err().to_string();
        assert!(err.starts_with("kfop.yaml:"), "{err}");
        assert!(err.contains("spec.hooks: "), "{err}");
        assert!(err.contains("remove `hooks: true`"), "{err}");
        let off = manifest::default_manifest("foo", "foo.example.com") + "  hooks: false\n";
        assert!(framework(&off, Path::new(FILE)).is_ok());
    }

    #[test]
    fn the_resource_is_frameworks_kfop_dev() {
        let resource = api_resource();
        assert_eq!(
            (
                resource.group.as_str(),
                resource.version.as_str(),
                resource.plural.as_str()
            ),
            ("kfop.dev", "v1alpha1", "frameworks")
        );
        assert_eq!(resource.api_version, format!("{GROUP}/{VERSION}"));
        assert_eq!(object_name("foo"), "framework.kfop.dev/foo");
    }

    fn with_conditions(conditions: Value) -> Value {
        json!({"metadata": {"name": "foo", "generation": 2}, "status": {"conditions": conditions}})
    }

    #[test]
    fn ready_true_is_ready_with_its_message() {
        let object = with_conditions(json!([
            {"type": "Accepted", "status": "True", "message": "valid"},
            {"type": "Ready", "status": "True", "message": "serving FooJob foo.example.com/v1"},
        ]));
        assert_eq!(
            readiness(&object, Some(2)),
            Readiness::Ready("serving FooJob foo.example.com/v1".into())
        );
    }

    #[test]
    fn accepted_false_is_rejected_whatever_ready_says() {
        let object = with_conditions(json!([
            {"type": "Ready", "status": "True", "message": "old"},
            {"type": "Accepted", "status": "False", "message": "spec.hooks: not supported"},
        ]));
        assert_eq!(
            readiness(&object, Some(2)),
            Readiness::Rejected("spec.hooks: not supported".into())
        );
    }

    #[test]
    fn no_status_or_ready_false_is_pending() {
        assert_eq!(
            readiness(&json!({"metadata": {}}), None),
            Readiness::Pending(None)
        );
        let object = with_conditions(json!([
            {"type": "Ready", "status": "False", "message": "installing the CRD"},
        ]));
        assert_eq!(
            readiness(&object, Some(2)),
            Readiness::Pending(Some("installing the CRD".into()))
        );
        let silent = with_conditions(json!([{"type": "Ready", "status": "Unknown"}]));
        assert_eq!(readiness(&silent, Some(2)), Readiness::Pending(None));
    }

    #[test]
    fn conditions_of_an_older_generation_are_ignored() {
        let stale = with_conditions(json!([
            {"type": "Ready", "status": "True", "message": "old spec", "observedGeneration": 1},
        ]));
        assert_eq!(readiness(&stale, Some(2)), Readiness::Pending(None));
        let mut by_status =
            with_conditions(json!([{"type": "Accepted", "status": "False", "message": "old"}]));
        by_status["status"]["observedGeneration"] = json!(1);
        assert_eq!(readiness(&by_status, Some(2)), Readiness::Pending(None));
        by_status["status"]["observedGeneration"] = json!(2);
        assert_eq!(readiness(&by_status, Some(2)), Readiness::Rejected("old".into()));
        // Without generations to compare, a condition counts.
        assert_eq!(readiness(&stale, None), Readiness::Ready("old spec".into()));
    }
}
