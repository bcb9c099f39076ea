// Scaffolded by kfop 0.1.0. This file is yours: `kfop gen` never changes it.
//! The MPIJob operator as a library: the API types and the framework kfop generates from
//! `kfop.yaml` (`src/generated/`), the objects a job owns and its status.
pub mod convert;
mod generated;
pub mod objects;
pub mod status;
pub mod v1;

pub use generated::*;

use kfop_runtime::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, ServiceReference, WebhookClientConfig,
    WebhookConversion,
};
use kfop_runtime::kube::CustomResourceExt;

/// The MPIJob CRD serving both `v2beta1` (mpi-operator's, stored) and `v1` (training-operator's),
/// converted by the operator's webhook behind the Service `service` in `namespace` (the operator
/// repoints it at itself, with its CA bundle, when it starts).
pub fn crd(namespace: &str, service: &str) -> CustomResourceDefinition {
    let mut crd = MPIJob::crd();
    crd.spec
        .versions
        .extend(v1::MPIJob::crd().spec.versions.into_iter().map(|mut v| {
            v.storage = false;
            v
        }));
    crd.spec.conversion = Some(CustomResourceConversion {
        strategy: "Webhook".to_owned(),
        webhook: Some(WebhookConversion {
            conversion_review_versions: vec!["v1".to_owned()],
            client_config: Some(WebhookClientConfig {
                service: Some(ServiceReference {
                    namespace: namespace.to_owned(),
                    name: service.to_owned(),
                    path: Some(kfop_runtime::webhook::conversion::PATH.to_owned()),
                    port: Some(443),
                }),
                ..WebhookClientConfig::default()
            }),
        }),
    });
    crd
}
