//! The operator's own identity: its ServiceAccount and least-privilege ClusterRole, exactly as
//! `kfop-operator deploy` prints them, applied to the plane; the operator then runs out of cluster
//! impersonating that ServiceAccount, so every request it sends is authorized as in a cluster and a
//! missing permission shows as a 403 in its `kfop_client_requests_total`.
use std::path::{Path, PathBuf};

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kfop_operator::deploy;
use kfop_operator::schemes;
use kfop_testenv::ControlPlane;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{Error, Result};

const MANAGER: &str = "kfop-bench";

/// Applies the RBAC of the all-in-one operator with every kind enabled, and the optional
/// run-time frameworks role for the jobs of `runtime_groups`, and returns a kubeconfig acting as
/// its ServiceAccount. `without` (`verb:resource`) is taken away from every rule granting it, so a
/// run can show that a missing permission is seen.
pub async fn service_account(
    plane: &ControlPlane,
    client: &Client,
    runtime_groups: &[&str],
    without: Option<&str>,
) -> Result<PathBuf> {
    let mut namespace = Namespace::default();
    namespace.metadata.name = Some(deploy::NAMESPACE.to_owned());
    apply(
        Api::<Namespace>::all(client.clone()),
        serde_json::to_value(namespace)?,
    )
    .await?;
    let all = schemes::parse(&[]).map_err(|e| Error::Operator(e.to_string()))?;
    let rbac = format!(
        "{}---\n{}",
        deploy::rbac(&all),
        deploy::runtime_frameworks_rbac_for(runtime_groups)
    );
    let docs: Vec<Value> = serde_saphyr::from_multiple(&rbac)
        .map_err(|e| Error::Operator(format!("the operator's RBAC manifest: {e}")))?;
    for mut doc in docs {
        if let Some(without) = without {
            take_away(&mut doc, without)?;
        }
        match doc["kind"].as_str() {
            Some("ServiceAccount") => {
                apply(
                    Api::<ServiceAccount>::namespaced(client.clone(), deploy::NAMESPACE),
                    doc,
                )
                .await?;
            }
            Some("ClusterRole") => apply(Api::<ClusterRole>::all(client.clone()), doc).await?,
            Some("ClusterRoleBinding") => apply(Api::<ClusterRoleBinding>::all(client.clone()), doc).await?,
            other => {
                return Err(Error::Operator(format!(
                    "unexpected kind {other:?} in the RBAC manifest"
                )));
            }
        }
    }
    let user = deploy::service_account_user();
    let kubeconfig = plane.kubeconfig_as(&user, &deploy::service_account_groups())?;
    let seen = whoami(&kubeconfig).await?;
    if seen != user {
        return Err(Error::Operator(format!(
            "{} authenticates as {seen:?}, not {user:?}",
            kubeconfig.display()
        )));
    }
    Ok(kubeconfig)
}

/// Removes `verb:resource` from every rule of a ClusterRole `doc` that grants it (and rules left
/// with no verb).
fn take_away(doc: &mut Value, permission: &str) -> Result<()> {
    let (verb, resource) = permission
        .split_once(':')
        .ok_or_else(|| Error::Operator(format!("{permission:?} is not VERB:RESOURCE")))?;
    if doc["kind"] != "ClusterRole" {
        return Ok(());
    }
    let Some(rules) = doc["rules"].as_array_mut() else {
        return Ok(());
    };
    for rule in rules.iter_mut() {
        let grants = rule["resources"]
            .as_array()
            .is_some_and(|names| names.iter().any(|name| name == resource));
        if grants && let Some(verbs) = rule["verbs"].as_array_mut() {
            verbs.retain(|v| v != verb);
        }
    }
    rules.retain(|rule| rule["verbs"].as_array().is_some_and(|v| !v.is_empty()));
    Ok(())
}

/// Who the API server takes the holder of `kubeconfig` for (a SelfSubjectReview).
async fn whoami(kubeconfig: &Path) -> Result<String> {
    let invalid = |e: &dyn std::fmt::Display| Error::Operator(format!("{}: {e}", kubeconfig.display()));
    let file = Kubeconfig::read_from(kubeconfig).map_err(|e| invalid(&e))?;
    let config = Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .map_err(|e| invalid(&e))?;
    let client = Client::try_from(config).map_err(|e| invalid(&e))?;
    let review = Api::<SelfSubjectReview>::all(client)
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .map_err(Error::kube("reviewing the impersonated identity"))?;
    Ok(review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .unwrap_or_default())
}

/// Server-side applies `doc` (typed first, so a malformed manifest fails here, not in the server).
async fn apply<K>(api: Api<K>, doc: Value) -> Result<()>
where
    K: Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
    K::DynamicType: Default,
{
    let object: K = serde_json::from_value(doc)?;
    let name = object.meta().name.clone().unwrap_or_default();
    api.patch(
        &name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&object),
    )
    .await
    .map_err(Error::kube(format!(
        "applying {} {name}",
        K::kind(&Default::default())
    )))?;
    Ok(())
}
