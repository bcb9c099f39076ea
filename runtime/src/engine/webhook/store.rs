//! The webhook certificate's home: a Secret in the operator's namespace that every replica
//! reads and any replica may rotate (optimistic concurrency on its resourceVersion decides who),
//! and the CRDs whose `spec.conversion` points at the webhook with the Secret's CA bundle.
use std::collections::BTreeMap;
use std::time::SystemTime;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition,
};
use kube::api::{ApiResource, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde::Deserialize;

use super::certs::{self, CertError};
use super::rotation::{self, Material, Policy, STAGED_AT, Step};

/// Why one pass over the Secret or a CRD failed (the next pass tries again).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{action} the webhook Secret {name}: {source}")]
    Secret {
        action: &'static str,
        name: String,
        source: kube::Error,
    },
    #[error("patching the conversion of CRD {name}: {source}")]
    Crd { name: String, source: kube::Error },
    #[error(transparent)]
    Cert(#[from] CertError),
}

/// A CRD's conversion as the API server has it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrdState {
    pub bundle: Option<String>,
    pub points_here: bool,
    /// Out of cluster: the other URL the CRD names (another replica's listener).
    pub other_url: Option<String>,
}

/// Where the API server reaches the webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// In cluster: a Service in front of the operator's pods (port 443).
    Service { namespace: String, name: String },
    /// Out of cluster (tests, a developer's machine): an `https://host:port` URL.
    Url(String),
}

/// `host[:port]` of an `https://host[:port]/path` URL.
fn authority(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    rest.split('/').next().unwrap_or(rest)
}

/// `host:port` to connect to for `url` (port 443 when it names none).
pub fn socket_address(url: &str) -> String {
    let authority = authority(url);
    let has_port = match authority.rsplit_once(']') {
        Some((_, after)) => after.starts_with(':'),
        None => authority.contains(':'),
    };
    if has_port {
        authority.to_owned()
    } else {
        format!("{authority}:443")
    }
}

impl Endpoint {
    /// The names the serving certificate must carry.
    pub fn hosts(&self) -> Vec<String> {
        match self {
            Endpoint::Service { namespace, name } => vec![
                format!("{name}.{namespace}.svc"),
                format!("{name}.{namespace}.svc.cluster.local"),
            ],
            Endpoint::Url(url) => {
                let authority = authority(url);
                let host = match authority.strip_prefix('[') {
                    Some(v6) => v6.split(']').next().unwrap_or(v6),
                    None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
                };
                vec![host.to_owned()]
            }
        }
    }

    /// `spec.conversion.webhook.clientConfig` for `path`, without the CA bundle.
    fn client_config(&self, path: &str) -> serde_json::Value {
        match self {
            Endpoint::Service { namespace, name } => serde_json::json!({
                "url": null,
                "service": {"namespace": namespace, "name": name, "path": path, "port": 443},
            }),
            Endpoint::Url(url) => serde_json::json!({
                "service": null,
                "url": format!("{}{path}", url.trim_end_matches('/')),
            }),
        }
    }
}

/// The Secret and the CRDs one operator keeps in step.
#[derive(Debug, Clone)]
pub struct Store {
    secrets: Api<Secret>,
    /// Untyped: only `spec.conversion` is read, and reading a CRD typed builds its whole schema
    /// (an idle MPIJob operator's RSS was 0.5 MB higher for the code and memory that takes).
    crds: Api<DynamicObject>,
    secret_name: String,
    endpoint: Endpoint,
    policy: Policy,
}

impl Store {
    pub fn new(
        client: Client,
        namespace: &str,
        secret_name: &str,
        endpoint: Endpoint,
        policy: Policy,
    ) -> Self {
        Self {
            secrets: Api::namespaced(client.clone(), namespace),
            crds: Api::all_with(client, &ApiResource::erase::<CustomResourceDefinition>(&())),
            secret_name: secret_name.to_owned(),
            endpoint,
            policy,
        }
    }

    fn secret_error(&self, action: &'static str) -> impl FnOnce(kube::Error) -> StoreError + '_ {
        move |source| StoreError::Secret {
            action,
            name: self.secret_name.clone(),
            source,
        }
    }

    fn issue(&self) -> Result<certs::Issued, CertError> {
        certs::issue(&self.endpoint.hosts(), self.policy.validity, SystemTime::now())
    }

    /// One pass: create or rotate the Secret as [`rotation::next_step`] says (given the first
    /// CRD's bundle), and returns what it then holds. A lost race to another replica returns
    /// the Secret as that replica left it.
    pub async fn sync_secret(&self, crd_bundle: Option<&str>) -> Result<Material, StoreError> {
        let existing = self
            .secrets
            .get_opt(&self.secret_name)
            .await
            .map_err(self.secret_error("reading"))?;
        let Some(secret) = existing else {
            let material = Material::fresh(self.issue()?);
            let created = self
                .secrets
                .create(&PostParams::default(), &self.to_secret(&material))
                .await;
            return match created {
                Ok(_) => Ok(material),
                Err(kube::Error::Api(e)) if e.code == 409 => self.read().await,
                Err(e) => Err(self.secret_error("creating")(e)),
            };
        };
        let current = material_of(&secret);
        let step = match &current {
            Some(current) => {
                rotation::next_step(current, crd_bundle, self.policy, SystemTime::now(), || {
                    self.issue()
                })?
            }
            // Someone emptied it: start again.
            None => Step::Write(Material::fresh(self.issue()?)),
        };
        let Step::Write(material) = step else {
            return current.ok_or_else(|| unreachable_empty(&self.secret_name));
        };
        // A merge patch carrying the resourceVersion it read: another replica's write in between
        // fails it with 409 (the `patch` verb the operator already holds for Secrets suffices).
        let patch = self.patch_of(&material, &secret);
        let patched = self
            .secrets
            .patch(&self.secret_name, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        match patched {
            Ok(_) => {
                tracing::info!(secret = %self.secret_name, staged = material.next.is_some(), "webhook certificate written");
                Ok(material)
            }
            Err(kube::Error::Api(e)) if e.code == 409 => self.read().await,
            Err(e) => Err(self.secret_error("updating")(e)),
        }
    }

    /// The merge patch turning `secret` into `material`: every key set, staged ones removed
    /// when nothing is staged.
    fn patch_of(&self, material: &Material, secret: &Secret) -> serde_json::Value {
        let wanted = self.to_secret(material);
        let mut data = serde_json::to_value(&wanted.data).unwrap_or_default();
        if material.next.is_none()
            && let Some(data) = data.as_object_mut()
        {
            data.insert(rotation::NEXT_CERT.to_owned(), serde_json::Value::Null);
            data.insert(rotation::NEXT_KEY.to_owned(), serde_json::Value::Null);
        }
        let staged = material
            .staged_at_annotation()
            .map_or(serde_json::Value::Null, serde_json::Value::String);
        serde_json::json!({
            "metadata": {
                "resourceVersion": secret.metadata.resource_version,
                "annotations": {STAGED_AT: staged},
            },
            "data": data,
        })
    }

    async fn read(&self) -> Result<Material, StoreError> {
        let secret = self
            .secrets
            .get(&self.secret_name)
            .await
            .map_err(self.secret_error("reading"))?;
        material_of(&secret).ok_or_else(|| unreachable_empty(&self.secret_name))
    }

    fn to_secret(&self, material: &Material) -> Secret {
        let annotations = material
            .staged_at_annotation()
            .map(|at| BTreeMap::from([(STAGED_AT.to_owned(), at)]));
        Secret {
            metadata: ObjectMeta {
                name: Some(self.secret_name.clone()),
                annotations,
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/managed-by".to_owned(),
                    "kfop".to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            type_: Some("kubernetes.io/tls".to_owned()),
            data: Some(
                material
                    .data()
                    .into_iter()
                    .map(|(k, v)| (k, ByteString(v.into_bytes())))
                    .collect(),
            ),
            ..Secret::default()
        }
    }

    /// How `crd`'s conversion webhook is configured now: the CA bundle it trusts, if any, and
    /// whether it points at this endpoint's `path`.
    pub async fn crd_state(&self, crd: &str, path: &str) -> Result<CrdState, StoreError> {
        let found = self.crds.get_opt(crd).await.map_err(|source| StoreError::Crd {
            name: crd.to_owned(),
            source,
        })?;
        let config = found
            .and_then(|c| CustomResourceConversion::deserialize(c.data.get("spec")?.get("conversion")?).ok())
            .filter(|c| c.strategy == "Webhook")
            .and_then(|c| c.webhook)
            .and_then(|w| w.client_config);
        let Some(config) = config else {
            return Ok(CrdState::default());
        };
        let points_here = match &self.endpoint {
            Endpoint::Url(url) => {
                config.url.as_deref() == Some(format!("{}{path}", url.trim_end_matches('/')).as_str())
            }
            Endpoint::Service { namespace, name } => config.service.as_ref().is_some_and(|s| {
                &s.namespace == namespace
                    && &s.name == name
                    && s.path.as_deref() == Some(path)
                    && s.port.unwrap_or(443) == 443
            }),
        };
        let other_url = match &self.endpoint {
            Endpoint::Url(_) if !points_here => config.url.clone(),
            _ => None,
        };
        Ok(CrdState {
            bundle: config
                .ca_bundle
                .map(|b| String::from_utf8_lossy(&b.0).into_owned()),
            points_here,
            other_url,
        })
    }

    /// Points `crd`'s conversion at the webhook's `path`, trusting `bundle`; a CRD not installed
    /// yet is left for the next pass.
    pub async fn point_crd(&self, crd: &str, path: &str, bundle: &str) -> Result<(), StoreError> {
        let mut client_config = self.endpoint.client_config(path);
        // ByteString serializes as the base64 the API wants for `caBundle`.
        client_config["caBundle"] =
            serde_json::to_value(ByteString(bundle.as_bytes().to_vec())).unwrap_or_default();
        let patch = serde_json::json!({
            "spec": {"conversion": {
                "strategy": "Webhook",
                "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": client_config},
            }},
        });
        match self
            .crds
            .patch(crd, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(source) => Err(StoreError::Crd {
                name: crd.to_owned(),
                source,
            }),
        }
    }
}

fn material_of(secret: &Secret) -> Option<Material> {
    let data: BTreeMap<String, String> = secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(&v.0).into_owned()))
        .collect();
    let annotations = secret.metadata.annotations.clone().unwrap_or_default();
    Material::from_secret(&data, &annotations)
}

/// A Secret another replica just wrote without the keys: reported, and the next pass rewrites it.
fn unreachable_empty(name: &str) -> StoreError {
    StoreError::Cert(CertError::Parse(format!(
        "the Secret {name} has no ca.crt, tls.crt and tls.key"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_of_each_endpoint() {
        let svc = Endpoint::Service {
            namespace: "kubeflow".into(),
            name: "kfop-operator-webhook".into(),
        };
        assert_eq!(
            svc.hosts(),
            [
                "kfop-operator-webhook.kubeflow.svc",
                "kfop-operator-webhook.kubeflow.svc.cluster.local"
            ]
        );
        assert_eq!(
            Endpoint::Url("https://127.0.0.1:9443".into()).hosts(),
            ["127.0.0.1"]
        );
        assert_eq!(Endpoint::Url("https://[::1]:9443/x".into()).hosts(), ["::1"]);
        assert_eq!(Endpoint::Url("https://localhost".into()).hosts(), ["localhost"]);
        assert_eq!(socket_address("https://127.0.0.1:9443/convert"), "127.0.0.1:9443");
        assert_eq!(socket_address("https://[::1]/convert"), "[::1]:443");
        assert_eq!(socket_address("https://[::1]:8443"), "[::1]:8443");
        assert_eq!(socket_address("https://localhost/convert"), "localhost:443");
    }
}
