//! An operator that serves no conversion webhook (out of cluster without `--webhook-url`) must
//! not run against a CRD whose conversion names a webhook nobody serves: every request in the
//! other version would fail with HTTP 500, and the garbage collector and namespace deletion,
//! which read such a kind in its preferred version, would stall. So it looks before it starts.
use std::time::Duration;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, WebhookClientConfig,
};
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, Client};
use serde::Deserialize;

use super::{Converter, WebhookError};

/// How long another replica gets to point a CRD at its webhook before this one gives up (replicas
/// started together race each other).
const GRACE: Duration = Duration::from_secs(20);

/// Where a CRD's conversion webhook is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Url(String),
    Service { namespace: String, name: String },
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Url(url) => write!(f, "{url}"),
            Self::Service { namespace, name } => write!(f, "the Service {namespace}/{name}"),
        }
    }
}

/// The webhook a CRD's `spec.conversion` names, if its strategy is `Webhook`.
pub fn target(crd: &serde_json::Value) -> Option<Target> {
    let conversion = CustomResourceConversion::deserialize(crd.get("spec")?.get("conversion")?).ok()?;
    if conversion.strategy != "Webhook" {
        return None;
    }
    let WebhookClientConfig { url, service, .. } = conversion.webhook?.client_config?;
    match (url, service) {
        (Some(url), _) => Some(Target::Url(url)),
        (None, Some(s)) => Some(Target::Service {
            namespace: s.namespace,
            name: s.name,
        }),
        (None, None) => None,
    }
}

/// Waits (up to [`GRACE`]) until every CRD of `converters` either converts without a webhook or
/// names one that something serves; fails naming the CRD, the webhook and the fix otherwise. A
/// check that cannot be made (no permission to read the CRD or the Service's endpoints) is
/// logged and passed: the operator may lack those rights and still be configured right.
pub async fn ensure_served(
    client: &Client,
    converters: &[std::sync::Arc<dyn Converter>],
) -> Result<(), WebhookError> {
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::erase::<CustomResourceDefinition>(&()),
    );
    let deadline = tokio::time::Instant::now() + GRACE;
    for converter in converters {
        let name = converter.crd();
        loop {
            let found = match crds.get_opt(name).await {
                Ok(found) => found,
                Err(e) => {
                    tracing::warn!(crd = name, error = %e, "cannot read the CRD to check its conversion webhook");
                    break;
                }
            };
            let Some(target) = found.and_then(|crd| target(&crd.data)) else {
                break;
            };
            match served(client, &target).await {
                Ok(true) => break,
                Ok(false) if tokio::time::Instant::now() < deadline => {
                    tracing::warn!(crd = name, webhook = %target, "the CRD's conversion webhook is not served (yet); waiting for it");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Ok(false) => {
                    return Err(WebhookError::Unserved {
                        crd: name.to_owned(),
                        target: target.to_string(),
                    });
                }
                Err(e) => {
                    tracing::warn!(crd = name, webhook = %target, error = %e, "cannot tell whether the conversion webhook is served");
                    break;
                }
            }
        }
    }
    Ok(())
}

/// Whether something serves `target`: a URL that accepts connections (another replica out of
/// cluster), or a Service with a ready endpoint (the operator in cluster).
async fn served(client: &Client, target: &Target) -> Result<bool, kube::Error> {
    match target {
        Target::Url(url) => Ok(super::answers(url).await),
        Target::Service { namespace, name } => {
            let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), namespace);
            let params = ListParams::default().labels(&format!("kubernetes.io/service-name={name}"));
            let list = slices.list(&params).await?;
            Ok(list
                .items
                .iter()
                .flat_map(endpoints)
                .any(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true)))
        }
    }
}

// Kubernetes 1.37's API made a slice's `endpoints` optional.
k8s_openapi::k8s_if_ge_1_37! {
    fn endpoints(slice: &EndpointSlice) -> &[k8s_openapi::api::discovery::v1::Endpoint] {
        slice.endpoints.as_deref().unwrap_or_default()
    }
}
k8s_openapi::k8s_if_le_1_36! {
    fn endpoints(slice: &EndpointSlice) -> &[k8s_openapi::api::discovery::v1::Endpoint] {
        &slice.endpoints
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    #[test]
    fn only_a_webhook_strategy_has_a_target() {
        let crd = |conversion: serde_json::Value| json!({"spec": {"conversion": conversion}});
        assert_eq!(target(&json!({"spec": {}})), None);
        assert_eq!(target(&crd(json!({"strategy": "None"}))), None);
        assert_eq!(
            target(&crd(json!({"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"url": "https://127.0.0.1:9443/convert"}}}))),
            Some(Target::Url("https://127.0.0.1:9443/convert".to_owned()))
        );
        let service = target(&crd(json!({"strategy": "Webhook", "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"service": {"namespace": "kubeflow", "name": "kfop-operator-webhook", "path": "/convert"}}}})))
        .unwrap();
        assert_eq!(service.to_string(), "the Service kubeflow/kfop-operator-webhook");
    }
}
