//! The per-process test environment: one control plane (or an attached cluster) shared by every
//! test in the process, a namespace per test.
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::kubeconfig;
use crate::plane::{ControlPlane, PlaneOptions};
use crate::wait;
use crate::{Error, Result};

/// Set to a kubeconfig path to run the tests against that cluster instead of a local plane.
pub const ATTACH_ENV: &str = "KFOP_TEST_KUBECONFIG";

/// A cluster for tests. Get the process-wide one with [`TestEnv::shared`].
#[derive(Debug)]
pub struct TestEnv {
    kubeconfig: PathBuf,
    local: bool,
}

static SHARED: OnceLock<std::result::Result<TestEnv, String>> = OnceLock::new();
static NAMESPACE_SEQ: AtomicU32 = AtomicU32::new(0);

impl TestEnv {
    /// The environment shared by all tests of this process: the cluster named by
    /// `KFOP_TEST_KUBECONFIG`, or a local control plane started on first use. Blocks while the
    /// plane starts (a few seconds); other callers wait for the same start.
    pub fn shared() -> Result<&'static Self> {
        SHARED
            .get_or_init(|| Self::init().map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| Error::Startup(e.clone()))
    }

    fn init() -> Result<Self> {
        if let Some(path) = std::env::var_os(ATTACH_ENV).filter(|p| !p.is_empty()) {
            return Ok(Self {
                kubeconfig: PathBuf::from(path),
                local: false,
            });
        }
        // The plane lives on a thread that never ends: its processes are tied to that thread's
        // life (parent-death signal), so they go exactly when the test process does.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("kfop-testenv-plane".to_owned())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
                let started = match runtime {
                    Ok(rt) => rt.block_on(ControlPlane::start(PlaneOptions::default())),
                    Err(e) => Err(Error::Startup(format!("tokio runtime: {e}"))),
                };
                match started {
                    Ok(plane) => {
                        let _ = tx.send(Ok(plane.kubeconfig().to_owned()));
                        loop {
                            std::thread::park();
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                    }
                }
            })
            .map_err(|e| Error::Startup(format!("spawning the plane thread: {e}")))?;
        let kubeconfig = rx.recv().map_err(|e| Error::Startup(e.to_string()))??;
        Ok(Self {
            kubeconfig,
            local: true,
        })
    }

    /// Whether this is a local plane with kwok nodes (pods can be driven with [`crate::pods`]).
    pub fn is_local(&self) -> bool {
        self.local
    }

    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// A new client. Make one per test: a client is bound to the tokio runtime it was built in.
    pub async fn client(&self) -> Result<Client> {
        kubeconfig::client_from(&self.kubeconfig).await
    }

    /// A fresh namespace `kfop-<prefix>-<n>`, deleted when the returned guard is dropped (kept
    /// if `KFOP_TEST_KEEP_NAMESPACES` is set, for debugging).
    pub async fn namespace(&self, prefix: &str) -> Result<TestNamespace> {
        let client = self.client().await?;
        let name = format!(
            "kfop-{prefix}-{}-{}",
            std::process::id(),
            NAMESPACE_SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let ns: Namespace = serde_json::from_value(json!({ "metadata": { "name": name } }))
            .map_err(|e| Error::Startup(e.to_string()))?;
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .map_err(Error::kube(format!("creating namespace {name}")))?;
        Ok(TestNamespace {
            name,
            kubeconfig: self.kubeconfig.clone(),
            client,
            deleted: false,
        })
    }

    /// Server-side applies the CRDs and waits until each is Established.
    pub async fn install_crds(&self, crds: impl IntoIterator<Item = CustomResourceDefinition>) -> Result<()> {
        let client = self.client().await?;
        install_crds(&client, crds).await
    }
}

/// Server-side applies the CRDs (forcing ownership) and waits until each is Established.
pub async fn install_crds(
    client: &Client,
    crds: impl IntoIterator<Item = CustomResourceDefinition>,
) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("kfop-testenv").force();
    for crd in crds {
        let name = crd.name_any();
        // An operator run out of cluster points a conversion webhook at its loopback URL (a
        // field this apply does not own, so it would stay beside the Service this CRD names,
        // which the API server rejects): drop it first.
        // The whole conversion goes in the reset, as an installed CRD may convert with strategy
        // None (Kubeflow's own), which forbids a webhook's clientConfig.
        let conversion = crd.spec.conversion.as_ref().filter(|c| {
            c.webhook
                .as_ref()
                .and_then(|w| w.client_config.as_ref())
                .is_some_and(|c| c.service.is_some())
        });
        if let Some(conversion) = conversion {
            let mut reset = serde_json::json!({"spec": {"conversion": conversion}});
            reset["spec"]["conversion"]["webhook"]["clientConfig"]["url"] = serde_json::Value::Null;
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&reset))
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(e) => return Err(Error::kube(format!("resetting CRD {name}'s webhook URL"))(e)),
            }
        }
        api.patch(&name, &params, &Patch::Apply(&crd))
            .await
            .map_err(Error::kube(format!("applying CRD {name}")))?;
        wait::until(
            &format!("CRD {name} to be Established"),
            wait::default_timeout(),
            || async {
                let crd = api
                    .get(&name)
                    .await
                    .map_err(Error::kube(format!("reading CRD {name}")))?;
                let established = crd
                    .status
                    .and_then(|s| s.conditions)
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"));
                Ok(established.then_some(()))
            },
        )
        .await?;
    }
    Ok(())
}

/// A namespace owned by one test.
pub struct TestNamespace {
    name: String,
    kubeconfig: PathBuf,
    client: Client,
    deleted: bool,
}

impl std::fmt::Debug for TestNamespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestNamespace")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl TestNamespace {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// A namespaced API in this namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }

    /// Deletes the namespace now (the drop guard does the same, blocking).
    pub async fn delete(mut self) -> Result<()> {
        self.deleted = true;
        delete_namespace(&self.client, &self.name).await
    }
}

async fn delete_namespace(client: &Client, name: &str) -> Result<()> {
    match Api::<Namespace>::all(client.clone())
        .delete(name, &DeleteParams::background())
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(Error::kube(format!("deleting namespace {name}"))(e)),
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        if self.deleted || std::env::var_os("KFOP_TEST_KEEP_NAMESPACES").is_some() {
            return;
        }
        // Drop cannot await, and the test's runtime may be shutting down: delete from a thread
        // with its own runtime and client.
        let (name, kubeconfig) = (self.name.clone(), self.kubeconfig.clone());
        let deleting = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                return;
            };
            rt.block_on(async {
                if let Ok(client) = kubeconfig::client_from(&kubeconfig).await
                    && let Err(e) = delete_namespace(&client, &name).await
                {
                    tracing::warn!(namespace = %name, error = %e, "could not delete test namespace");
                }
            });
        });
        let _ = deleting.join();
    }
}
