//! `kfop-operator migrate-storage`: a storage-version migration of one CRD, as the
//! kube-storage-version-migrator does it: make `--to` the CRD's storage version, rewrite every
//! object unchanged (the API server re-encodes it in the storage version; one already stored so
//! is left alone), then drop the other versions from `status.storedVersions`, so that they can
//! later leave the CRD.
//!
//! It takes over and hands back MPIJobs. After kfop's CRD replaces training-operator's, jobs
//! Kubeflow wrote stay stored as `v1` until written again; the rewrite reads each through the
//! conversion webhook, which marks one without `kfop.dev/created-as` as created in `v1` (only
//! `v1` was served when it was stored), and stores that mark with it. Before handing back to
//! training-operator, whose CRD serves `v1` alone, `--to v1` stores every job as `v1` while the
//! webhook still runs. A command run by the cluster's administrator, not the operator: it
//! writes the CRD, which the operator's ClusterRole does not grant.
use std::time::{Duration, Instant};

use kfop_runtime::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kfop_runtime::k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use kfop_runtime::kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kfop_runtime::kube::{Client, ResourceExt};
use kfop_runtime::serde_json::json;

/// The CRD `migrate-storage` rewrites unless told otherwise: the one kind kfop serves in two
/// versions.
pub const DEFAULT_CRD: &str = "mpijobs.kubeflow.org";

/// How long the API server may take to serve the CRD with its new storage version.
const SWITCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Objects read per page.
const PAGE: u32 = 200;

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("{what}: {source}")]
    Kube {
        what: String,
        source: kfop_runtime::kube::Error,
    },
    #[error("CRD {crd} serves no version {version} (it serves {served})")]
    NotServed {
        crd: String,
        version: String,
        served: String,
    },
    #[error("the API server did not switch {crd}'s storage to {version} within {}s", SWITCH_TIMEOUT.as_secs())]
    NotSwitched { crd: String, version: String },
    #[error(
        "{failed} of {total} objects of {crd} could not be rewritten (status.storedVersions left as it was); first: {first}"
    )]
    Rewrite {
        crd: String,
        failed: usize,
        total: usize,
        first: String,
    },
}

fn kube_error(what: impl Into<String>) -> impl FnOnce(kfop_runtime::kube::Error) -> StorageError {
    let what = what.into();
    move |source| StorageError::Kube { what, source }
}

/// What a migration did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migrated {
    pub crd: String,
    pub version: String,
    /// The storage version before (the same as `version` when it already was).
    pub storage_before: String,
    pub stored_versions_before: Vec<String>,
    /// Objects read and written back.
    pub rewritten: usize,
    /// Objects deleted or changed by someone else while being rewritten (a write after the
    /// switch stores them in the new version anyway).
    pub raced: usize,
}

impl std::fmt::Display for Migrated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: storage version {} (was {}), {} objects rewritten ({} changed meanwhile), \
             status.storedVersions [{}] (was [{}])",
            self.crd,
            self.version,
            self.storage_before,
            self.rewritten,
            self.raced,
            self.version,
            self.stored_versions_before.join(", ")
        )
    }
}

/// Migrates `crd_name`'s objects to storage version `to`.
#[tracing::instrument(skip(client))]
pub async fn migrate(client: &Client, crd_name: &str, to: &str) -> Result<Migrated, StorageError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = crds
        .get(crd_name)
        .await
        .map_err(kube_error(format!("reading CRD {crd_name}")))?;
    let served: Vec<String> = crd
        .spec
        .versions
        .iter()
        .filter(|v| v.served)
        .map(|v| v.name.clone())
        .collect();
    if !served.iter().any(|v| v == to) {
        return Err(StorageError::NotServed {
            crd: crd_name.to_owned(),
            version: to.to_owned(),
            served: served.join(", "),
        });
    }
    let storage_before = crd
        .spec
        .versions
        .iter()
        .find(|v| v.storage)
        .map(|v| v.name.clone())
        .unwrap_or_default();
    let stored_versions_before = crd
        .status
        .as_ref()
        .and_then(|s| s.stored_versions.clone())
        .unwrap_or_default();
    let resource = ApiResource {
        group: crd.spec.group.clone(),
        version: to.to_owned(),
        api_version: format!("{}/{to}", crd.spec.group),
        kind: crd.spec.names.kind.clone(),
        plural: crd.spec.names.plural.clone(),
    };
    if storage_before != to {
        let hash_before = storage_hash(client, &resource).await?;
        for version in &mut crd.spec.versions {
            version.storage = version.name == to;
        }
        crds.replace(crd_name, &PostParams::default(), &crd)
            .await
            .map_err(kube_error(format!(
                "making {to} the storage version of {crd_name}"
            )))?;
        wait_switched(client, &resource, hash_before.as_deref(), crd_name).await?;
        tracing::info!(crd = crd_name, from = %storage_before, to, "storage version switched");
    }

    let (rewritten, raced) = rewrite_all(client, &resource, crd_name).await?;
    let status = json!({ "status": { "storedVersions": [to] } });
    crds.patch_status(crd_name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .map_err(kube_error(format!("setting {crd_name}'s status.storedVersions")))?;
    Ok(Migrated {
        crd: crd_name.to_owned(),
        version: to.to_owned(),
        storage_before,
        stored_versions_before,
        rewritten,
        raced,
    })
}

/// The storage version hash discovery shows for `resource`: it changes once the API server
/// serves the resource with the CRD's new storage version (what the storage-version migrator
/// watches for too).
async fn storage_hash(client: &Client, resource: &ApiResource) -> Result<Option<String>, StorageError> {
    let list: APIResourceList = client
        .list_api_group_resources(&resource.api_version)
        .await
        .map_err(kube_error(format!("discovery of {}", resource.api_version)))?;
    Ok(list
        .resources
        .into_iter()
        .find(|r| r.name == resource.plural)
        .and_then(|r| r.storage_version_hash))
}

async fn wait_switched(
    client: &Client,
    resource: &ApiResource,
    before: Option<&str>,
    crd: &str,
) -> Result<(), StorageError> {
    let deadline = Instant::now() + SWITCH_TIMEOUT;
    loop {
        let now = storage_hash(client, resource).await?;
        if now.is_some() && now.as_deref() != before {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(StorageError::NotSwitched {
                crd: crd.to_owned(),
                version: resource.version.clone(),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Writes every object back as read in `resource`'s version, page by page; returns how many
/// were written and how many changed or went meanwhile (conflict or not found).
async fn rewrite_all(
    client: &Client,
    resource: &ApiResource,
    crd: &str,
) -> Result<(usize, usize), StorageError> {
    let all: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    let (mut rewritten, mut raced, mut failed) = (0, 0, Vec::new());
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = all
            .list(&params)
            .await
            .map_err(kube_error(format!("listing {crd}")))?;
        for object in &page.items {
            let name = object.name_any();
            let namespace = object.namespace().unwrap_or_default();
            let api: Api<DynamicObject> = if namespace.is_empty() {
                Api::all_with(client.clone(), resource)
            } else {
                Api::namespaced_with(client.clone(), &namespace, resource)
            };
            match api.replace(&name, &PostParams::default(), object).await {
                Ok(_) => rewritten += 1,
                Err(kfop_runtime::kube::Error::Api(s)) if s.code == 404 || s.code == 409 => raced += 1,
                Err(e) => failed.push(format!("{namespace}/{name}: {e}")),
            }
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    if let Some(first) = failed.first() {
        return Err(StorageError::Rewrite {
            crd: crd.to_owned(),
            failed: failed.len(),
            total: rewritten + raced + failed.len(),
            first: first.clone(),
        });
    }
    Ok((rewritten, raced))
}
