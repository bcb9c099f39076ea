//! `--enable-scheme`: which job kinds the operator runs (Kubeflow's flag, case-insensitive).
use std::collections::BTreeSet;
use std::sync::Arc;

use kfop_runtime::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kfop_runtime::kube::CustomResourceExt;
use kfop_runtime::manager::Manager;
use kfop_runtime::webhook::Converter;

/// The one list of bundled kinds: variant, `--enable-scheme` name, framework, job type.
macro_rules! bundled_kinds {
    ($($variant:ident = $flag:literal: $framework:expr, $job:ty;)*) => {
        /// The bundled job kinds, by the lower-case name `--enable-scheme` takes.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
        pub enum Scheme {
            $($variant,)*
        }

        impl Scheme {
            pub const ALL: [(&'static str, Self); [$($flag),*].len()] = [$(($flag, Self::$variant),)*];

            /// Registers this kind's controller.
            fn register_controller(self, manager: Manager) -> Manager {
                match self {
                    $(Self::$variant => manager.register($framework),)*
                }
            }

            /// This kind's CRD as its derive makes it: one version (for MPIJob v2beta1 alone),
            /// for an operator run without its conversion webhook (in process, in tests and
            /// the demo), where a CRD naming an absent webhook would hold up the garbage
            /// collector and namespace deletion (both read MPIJobs in v1, the preferred
            /// version).
            pub fn crd_without_conversion(self) -> CustomResourceDefinition {
                match self {
                    $(Self::$variant => <$job>::crd(),)*
                }
            }
        }
    };
}

bundled_kinds! {
    TfJob = "tfjob": tensorflow_operator::Tensorflow, tensorflow_operator::TFJob;
    PyTorchJob = "pytorchjob": pytorch_operator::Pytorch, pytorch_operator::PyTorchJob;
    XgBoostJob = "xgboostjob": xgboost_operator::Xgboost, xgboost_operator::XGBoostJob;
    PaddleJob = "paddlejob": paddle_operator::Paddle, paddle_operator::PaddleJob;
    JaxJob = "jaxjob": jax_operator::Jax, jax_operator::JAXJob;
    MxJob = "mxjob": mxnet_operator::Mxnet, mxnet_operator::MXJob;
    MpiJob = "mpijob": mpi_operator::Mpi, mpi_operator::MPIJob;
}

impl Scheme {
    /// Registers this kind's controller, and its converter when it has several versions.
    pub fn register(self, manager: Manager) -> Manager {
        let manager = self.register_controller(manager);
        match self.converter() {
            Some(converter) => manager.convert(converter),
            None => manager,
        }
    }

    /// The conversion between this kind's versions, when it has several.
    pub fn converter(self) -> Option<Arc<dyn Converter>> {
        match self {
            Self::MpiJob => Some(Arc::new(mpi_operator::convert::MpiConversion)),
            _ => None,
        }
    }

    /// This kind's CRD.
    pub fn crd(self) -> CustomResourceDefinition {
        match self {
            // training-operator's v1 and mpi-operator's v2beta1, converted by the webhook.
            Self::MpiJob => mpi_operator::crd(crate::deploy::NAMESPACE, &crate::deploy::webhook_service()),
            _ => self.crd_without_conversion(),
        }
    }
}

/// An `--enable-scheme` value that names no bundled kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownScheme(pub String);

impl std::fmt::Display for UnknownScheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = Scheme::ALL.iter().map(|(name, _)| *name).collect();
        write!(
            f,
            "--enable-scheme: unknown kind `{}`; use any of {}",
            self.0,
            names.join(", ")
        )
    }
}

impl std::error::Error for UnknownScheme {}

/// The kinds to run: every one when the flag is absent, else those named (any letter case,
/// repeated or comma-separated).
pub fn parse(values: &[String]) -> Result<BTreeSet<Scheme>, UnknownScheme> {
    if values.is_empty() {
        return Ok(Scheme::ALL.iter().map(|(_, s)| *s).collect());
    }
    values
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(|v| {
            Scheme::ALL
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(v))
                .map(|(_, s)| *s)
                .ok_or_else(|| UnknownScheme(v.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_by_default_and_case_insensitive() {
        assert_eq!(parse(&[]).unwrap().len(), 7);
        let s = parse(&["TFJob".into(), "pytorchjob,JAXJOB".into()]).unwrap();
        assert_eq!(
            s.into_iter().collect::<Vec<_>>(),
            [Scheme::TfJob, Scheme::PyTorchJob, Scheme::JaxJob]
        );
        assert_eq!(parse(&["MPIJob".into()]).unwrap(), [Scheme::MpiJob].into());
        assert_eq!(parse(&["mpi".into()]).unwrap_err().0, "mpi");
    }
}
