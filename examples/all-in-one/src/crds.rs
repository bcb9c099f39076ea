//! The CRDs of the bundled kinds.
use std::collections::BTreeSet;

use kfop_runtime::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kfop_runtime::kube::CustomResourceExt;

use crate::schemes::Scheme;

pub fn of(scheme: Scheme) -> CustomResourceDefinition {
    match scheme {
        Scheme::TfJob => tensorflow_operator::TFJob::crd(),
        Scheme::PyTorchJob => pytorch_operator::PyTorchJob::crd(),
        Scheme::XgBoostJob => xgboost_operator::XGBoostJob::crd(),
        Scheme::PaddleJob => paddle_operator::PaddleJob::crd(),
        Scheme::JaxJob => jax_operator::JAXJob::crd(),
        Scheme::MxJob => mxnet_operator::MXJob::crd(),
        Scheme::MpiJob => mpi_operator::MPIJob::crd(),
    }
}

/// Every enabled CRD as one multi-document YAML stream.
pub fn yaml(enabled: &BTreeSet<Scheme>) -> kfop_runtime::Result<String> {
    let docs = enabled
        .iter()
        .map(|s| kfop_runtime::crd_yaml(&of(*s)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(docs.join("---\n"))
}
