//! Watches `Framework` resources and keeps one controller per valid one: validates the manifest
//! (the validator `kfop gen` runs), installs its CRD, waits until the API server serves it,
//! starts its controller through the manager's [`Registry`], and reports `Accepted` and `Ready`.
//! A changed Framework replaces its controller; a deleted one stops it and leaves the CRD and
//! its jobs (unless [`super::REMOVE_CRD_ANNOTATION`] says otherwise). An invalid change keeps the
//! previous generation running and says why it was refused.
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::resource::{Framework, FrameworkCondition, FrameworkStatus, REMOVE_CRD_ANNOTATION};
use super::{DynamicError, NoCode, crd};
use crate::framework::Loaded;
use crate::manager::{Registry, Running};
use crate::manifest::model::{self, Model};

/// How the loader treats Frameworks.
#[derive(Debug, Clone, Default)]
pub struct LoaderConfig {
    /// Whether Frameworks may install CRDs and start controllers (`--runtime-frameworks`); when
    /// not, each one is refused with a condition saying so.
    pub enabled: bool,
    /// The CRD names (`<plural>.<group>`) of the kinds compiled into this operator, which no
    /// Framework may take over.
    pub compiled: Vec<String>,
}

/// How long a freshly applied CRD may take to be served.
const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(30);
const FIELD_MANAGER: &str = "kfop-frameworks";
/// The last generation a Framework was served as, `{"generation": N, "spec": {...}}`: what a
/// restarted operator runs while the Framework's current generation is refused.
pub const SERVED_ANNOTATION: &str = "kfop.dev/served-spec";
/// How often the loader looks for the Framework CRD while it is missing.
const CRD_RETRY: Duration = Duration::from_secs(10);

/// A Framework whose controller runs.
struct Served {
    generation: Option<i64>,
    crd_name: String,
    running: Running,
}

/// Runs the loader until the Framework watch ends.
pub async fn run(registry: Registry, config: LoaderConfig) -> crate::Result<()> {
    let client = registry.client().clone();
    let frameworks: Api<Framework> = Api::all(client.clone());
    // Without the Framework CRD (or the right to read it) the operator runs its compiled kinds
    // as before; it looks again now and then, so installing the CRD later needs no restart.
    let mut warned = false;
    while let Err(e) = frameworks.list(&ListParams::default().limit(1)).await {
        if !warned {
            tracing::warn!(error = %DynamicError::FrameworkCrdMissing(e), "run-time frameworks are off until it is");
            warned = true;
        }
        tokio::time::sleep(CRD_RETRY).await;
    }
    let mut loader = Loader {
        registry,
        config,
        frameworks: frameworks.clone(),
        crds: Api::all(client),
        loaded: HashMap::new(),
        refused: HashSet::new(),
    };
    let mut seen = HashSet::new();
    let mut events = watcher(frameworks, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Init) => seen.clear(),
            Ok(watcher::Event::InitApply(framework) | watcher::Event::Apply(framework)) => {
                seen.insert(framework.name_any());
                loader.apply(&framework).await;
            }
            Ok(watcher::Event::InitDone) => {
                let gone: Vec<String> = loader
                    .loaded
                    .keys()
                    .filter(|name| !seen.contains(*name))
                    .cloned()
                    .collect();
                for name in gone {
                    loader.stop(&name).await;
                }
            }
            Ok(watcher::Event::Delete(framework)) => loader.delete(&framework).await,
            Err(e) => tracing::warn!(error = %e, "watching Frameworks"),
        }
    }
    Ok(())
}

/// Accepted's message: valid, and the manifest's warnings (deprecated spellings).
fn valid_message(warnings: &[String]) -> String {
    if warnings.is_empty() {
        "the manifest is valid".to_owned()
    } else {
        format!("the manifest is valid; {}", warnings.join("; "))
    }
}

/// The Ready message of a Framework whose change was refused while `crd_name` still runs as
/// generation `previous` defined it, e.g. "generation 3 was refused; rtjaxjobs.example.com is
/// still served as generation 2 defined it".
fn still_serving(crd_name: &str, previous: Option<i64>, refused: Option<i64>) -> String {
    let named = |generation: Option<i64>, unknown: &str| {
        generation.map_or_else(|| unknown.to_owned(), |g| format!("generation {g}"))
    };
    format!(
        "{} was refused; {crd_name} is still served as {} defined it",
        named(refused, "this generation"),
        named(previous, "the previous generation")
    )
}

struct Loader {
    registry: Registry,
    config: LoaderConfig,
    frameworks: Api<Framework>,
    crds: Api<CustomResourceDefinition>,
    loaded: HashMap<String, Served>,
    /// Framework generations refused (and said so) since this operator started.
    refused: HashSet<(String, Option<i64>)>,
}

/// Why a Framework is not served: the condition's reason and message.
struct Refusal {
    accepted: bool,
    reason: &'static str,
    message: String,
}

impl Refusal {
    fn invalid(message: impl Into<String>) -> Self {
        Self {
            accepted: false,
            reason: "InvalidManifest",
            message: message.into(),
        }
    }
}

impl Loader {
    #[tracing::instrument(name = "framework", skip_all, fields(framework = %framework.name_any()))]
    async fn apply(&mut self, framework: &Framework) {
        let name = framework.name_any();
        let generation = framework.metadata.generation;
        // Our own status write comes back as a change: a generation judged before is judged
        // again only if its controller has ended since.
        let judged = framework.status.as_ref().and_then(|s| s.observed_generation) == generation;
        let running = self.loaded.get(&name).filter(|l| l.generation == generation);
        match running {
            Some(loaded) if !loaded.running.is_finished() => return,
            None if judged && self.refused.contains(&(name.clone(), generation)) => return,
            _ => {}
        }
        let outcome = match self.check(framework) {
            Ok((model, warnings, runtime)) => self
                .serve(&name, generation, &model, runtime)
                .await
                .map(|message| (message, warnings)),
            Err(refusal) => {
                self.serve_recorded(framework).await;
                Err(refusal)
            }
        };
        if outcome.is_ok() {
            self.record_served(framework).await;
        }
        let conditions = match outcome {
            Ok((message, warnings)) => {
                tracing::info!(%message, "framework ready");
                self.refused.retain(|(n, _)| *n != name);
                vec![
                    FrameworkCondition::new("Accepted", true, "Valid", valid_message(&warnings)),
                    FrameworkCondition::new("Ready", true, "Serving", message),
                ]
            }
            Err(refusal) => {
                tracing::warn!(reason = refusal.reason, message = %refusal.message, "framework refused");
                self.refused.insert((name.clone(), generation));
                let previous = self.loaded.get(&name).filter(|l| !l.running.is_finished());
                let ready = match previous {
                    Some(l) => FrameworkCondition::new(
                        "Ready",
                        true,
                        "PreviousGeneration",
                        still_serving(&l.crd_name, l.generation, generation),
                    ),
                    None => FrameworkCondition::new("Ready", false, refusal.reason, refusal.message.clone()),
                };
                vec![
                    FrameworkCondition::new("Accepted", refusal.accepted, refusal.reason, refusal.message),
                    ready,
                ]
            }
        };
        let status = FrameworkStatus {
            observed_generation: generation,
            conditions,
        };
        if let Err(e) = self
            .frameworks
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
        {
            tracing::warn!(error = %e, "could not write the Framework's status");
        }
    }

    /// Validates the manifest and whether it may run here; with the manifest's deprecation warnings.
    fn check(&self, framework: &Framework) -> Result<(Model, Vec<String>, Loaded<NoCode>), Refusal> {
        let name = framework.name_any();
        let document = json!({
            "apiVersion": model::API_VERSION,
            "kind": model::KIND,
            "metadata": { "name": name },
            "spec": framework.spec.fields,
        });
        // JSON is YAML: the manifest validator reads it as it reads kfop.yaml.
        let text = serde_json::to_string_pretty(&document).map_err(|e| Refusal::invalid(e.to_string()))?;
        let model::Validated { model, warnings } =
            model::parse_with_warnings(&text, Path::new(&format!("frameworks/{name}")))
                .map_err(|e| Refusal::invalid(e.to_string()))?;
        // Positions would point into the JSON rendering, not the applied YAML: field and message.
        let warnings = warnings
            .iter()
            .map(|w| format!("{}: {}", w.field, w.message))
            .collect();
        let runtime = super::load(&model).map_err(|e| Refusal::invalid(e.to_string()))?;
        let crd_name = format!("{}.{}", model.plural, model.group);
        let refuse = |reason, message: String| Refusal {
            accepted: false,
            reason,
            message,
        };
        if !self.config.enabled {
            return Err(refuse(
                "Disabled",
                "this operator runs with --runtime-frameworks=false: it installs no CRDs for Frameworks"
                    .to_owned(),
            ));
        }
        if self.config.compiled.contains(&crd_name) {
            return Err(refuse(
                "KindTaken",
                format!("{crd_name} is compiled into this operator; choose another group or kind"),
            ));
        }
        if let Some((other, _)) = self
            .loaded
            .iter()
            .find(|(other, l)| **other != name && l.crd_name == crd_name)
        {
            return Err(refuse(
                "KindTaken",
                format!(
                    "{crd_name} is already served for Framework {other}; delete that one or choose another kind"
                ),
            ));
        }
        Ok((model, warnings, runtime))
    }

    /// Records the spec now served on the Framework, for [`Self::serve_recorded`] after a restart.
    async fn record_served(&self, framework: &Framework) {
        let served = json!({ "generation": framework.metadata.generation, "spec": framework.spec.fields });
        let patch = json!({ "metadata": { "annotations": { SERVED_ANNOTATION: served.to_string() } } });
        if let Err(e) = self
            .frameworks
            .patch(
                &framework.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            tracing::warn!(error = %e, "could not record the served generation");
        }
    }

    /// A refused generation of a Framework no controller runs for (the operator restarted since
    /// the last one it served): runs the generation recorded as served, so a bad edit stops no
    /// kind that was running.
    async fn serve_recorded(&mut self, framework: &Framework) {
        let name = framework.name_any();
        if self.loaded.get(&name).is_some_and(|l| !l.running.is_finished()) {
            return;
        }
        let Some(recorded) = framework.annotations().get(SERVED_ANNOTATION) else {
            return;
        };
        let Ok(recorded) = serde_json::from_str::<serde_json::Value>(recorded) else {
            return;
        };
        let mut previous = framework.clone();
        previous.metadata.generation = recorded["generation"].as_i64();
        match recorded["spec"].as_object() {
            Some(fields) => previous.spec.fields = fields.clone(),
            None => return,
        }
        match self.check(&previous) {
            Ok((model, _, runtime)) => {
                if let Err(refusal) = self
                    .serve(&name, previous.metadata.generation, &model, runtime)
                    .await
                {
                    tracing::warn!(message = %refusal.message, "could not serve the recorded generation");
                }
            }
            Err(refusal) => {
                tracing::warn!(message = %refusal.message, "the recorded generation is refused too")
            }
        }
    }

    /// Installs the CRD, waits until it is served, and (re)starts the controller.
    async fn serve(
        &mut self,
        name: &str,
        generation: Option<i64>,
        model: &Model,
        runtime: Loaded<NoCode>,
    ) -> Result<String, Refusal> {
        let not_ready = |message: String| Refusal {
            accepted: true,
            reason: "CrdNotEstablished",
            message,
        };
        let definition = crd(model).map_err(|e| not_ready(format!("building the CRD: {e}")))?;
        let crd_name = definition.name_any();
        self.crds
            .patch(
                &crd_name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&definition),
            )
            .await
            .map_err(|e| not_ready(format!("installing {crd_name}: {e}")))?;
        self.wait_established(&crd_name).await.map_err(not_ready)?;
        if let Some(previous) = self.loaded.remove(name)
            && let Err(e) = previous.running.stop().await
        {
            tracing::warn!(error = %e, "the previous controller ended with an error");
        }
        let running = self.registry.start(runtime);
        self.loaded.insert(
            name.to_owned(),
            Served {
                generation,
                crd_name: crd_name.clone(),
                running,
            },
        );
        Ok(format!("{crd_name} is served and its controller runs"))
    }

    async fn wait_established(&self, crd_name: &str) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + ESTABLISH_TIMEOUT;
        loop {
            let crd = self
                .crds
                .get(crd_name)
                .await
                .map_err(|e| format!("reading {crd_name}: {e}"))?;
            let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
            if conditions
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
            {
                return Ok(());
            }
            if let Some(c) = conditions
                .iter()
                .find(|c| c.type_ == "NamesAccepted" && c.status == "False")
            {
                return Err(format!("{crd_name}: {}", c.message.clone().unwrap_or_default()));
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!(
                    "{crd_name} was not established within {ESTABLISH_TIMEOUT:?}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn stop(&mut self, name: &str) -> Option<String> {
        let loaded = self.loaded.remove(name)?;
        tracing::info!(framework = name, crd = %loaded.crd_name, "stopping the controller");
        if let Err(e) = loaded.running.stop().await {
            tracing::warn!(framework = name, error = %e, "the controller ended with an error");
        }
        Some(loaded.crd_name)
    }

    async fn delete(&mut self, framework: &Framework) {
        let name = framework.name_any();
        self.refused.retain(|(n, _)| *n != name);
        let Some(crd_name) = self.stop(&name).await else {
            return;
        };
        let remove = framework
            .annotations()
            .get(REMOVE_CRD_ANNOTATION)
            .is_some_and(|v| v == "true");
        if remove && let Err(e) = self.crds.delete(&crd_name, &DeleteParams::background()).await {
            tracing::warn!(framework = %name, crd = %crd_name, error = %e, "could not delete the CRD");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{still_serving, valid_message};

    #[test]
    fn warnings_are_named_in_the_accepted_message() {
        assert_eq!(valid_message(&[]), "the manifest is valid");
        assert_eq!(
            valid_message(&["spec.success: deprecated: move it".to_owned()]),
            "the manifest is valid; spec.success: deprecated: move it"
        );
    }

    #[test]
    fn a_refused_change_names_both_generations_in_words() {
        assert_eq!(
            still_serving("rtjaxjobs.example.com", Some(2), Some(3)),
            "generation 3 was refused; rtjaxjobs.example.com is still served as generation 2 defined it"
        );
        assert_eq!(
            still_serving("rtjaxjobs.example.com", None, None),
            "this generation was refused; rtjaxjobs.example.com is still served as the previous generation defined it"
        );
    }
}
