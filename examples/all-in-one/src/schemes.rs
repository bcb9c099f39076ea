//! `--enable-scheme`: which job kinds the operator runs (Kubeflow's flag, case-insensitive).
use std::collections::BTreeSet;
use std::sync::Arc;

use kfop_runtime::LoadError;
use kfop_runtime::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kfop_runtime::kube::CustomResourceExt;
use kfop_runtime::manager::Manager;
use kfop_runtime::webhook::Converter;

/// The one list of bundled kinds: variant, `--enable-scheme` name, the framework's crate, its
/// code as configured, job type.
macro_rules! bundled_kinds {
    ($($variant:ident = $flag:literal: $krate:ident, $code:expr, $job:ty;)*) => {
        /// The bundled job kinds, by the lower-case name `--enable-scheme` takes.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
        pub enum Scheme {
            $($variant,)*
        }

        impl Scheme {
            pub const ALL: [(&'static str, Self); [$($flag),*].len()] = [$(($flag, Self::$variant),)*];

            /// Registers this kind's controller, its code configured by `config`.
            fn register_controller(self, manager: Manager, config: &FrameworkConfig) -> Result<Manager, LoadError> {
                Ok(match self {
                    $(Self::$variant => manager.register($krate::framework(($code)(config))?),)*
                })
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
    TfJob = "tfjob": tensorflow_operator, FrameworkConfig::tensorflow, tensorflow_operator::TFJob;
    PyTorchJob = "pytorchjob": pytorch_operator, FrameworkConfig::pytorch, pytorch_operator::PyTorchJob;
    XgBoostJob = "xgboostjob": xgboost_operator, |_| xgboost_operator::Xgboost, xgboost_operator::XGBoostJob;
    PaddleJob = "paddlejob": paddle_operator, |_| paddle_operator::Paddle, paddle_operator::PaddleJob;
    JaxJob = "jaxjob": jax_operator, |_| jax_operator::Jax, jax_operator::JAXJob;
    MxJob = "mxjob": mxnet_operator, |_| mxnet_operator::Mxnet, mxnet_operator::MXJob;
    MpiJob = "mpijob": mpi_operator, FrameworkConfig::mpi, mpi_operator::MPIJob;
}

/// What the bundled frameworks' code is configured with: the operator's flags that
/// training-operator has for them.
#[derive(Debug, Clone, clap::Args)]
pub struct FrameworkConfig {
    /// Image of the init container of a PyTorchJob's workers that waits for the master
    /// (training-operator's flag of the same name)
    #[arg(long, env = "PYTORCH_INIT_CONTAINER_IMAGE", default_value = pytorch_operator::hooks::INIT_IMAGE)]
    pub pytorch_init_container_image: String,
    /// Cluster domain TF_CONFIG's host names end in, none when empty (training-operator reads
    /// the same environment variable)
    #[arg(long, env = "CUSTOM_CLUSTER_DOMAIN", default_value = "")]
    pub custom_cluster_domain: String,
    /// Image of the kubectl-delivery init container of a v1 MPIJob's launcher, which copies
    /// kubectl in for kubexec.sh (training-operator's flag of the same name)
    #[arg(long, default_value = mpi_operator::v1::DEFAULT_KUBECTL_DELIVERY_IMAGE)]
    pub mpi_kubectl_delivery_image: String,
}

impl Default for FrameworkConfig {
    fn default() -> Self {
        Self {
            pytorch_init_container_image: pytorch_operator::hooks::INIT_IMAGE.to_owned(),
            custom_cluster_domain: String::new(),
            mpi_kubectl_delivery_image: mpi_operator::v1::DEFAULT_KUBECTL_DELIVERY_IMAGE.to_owned(),
        }
    }
}

impl FrameworkConfig {
    fn tensorflow(&self) -> tensorflow_operator::Tensorflow {
        tensorflow_operator::Tensorflow {
            cluster_domain: self.custom_cluster_domain.clone(),
        }
    }

    fn pytorch(&self) -> pytorch_operator::Pytorch {
        pytorch_operator::Pytorch {
            init_container_image: self.pytorch_init_container_image.clone(),
        }
    }

    fn mpi(&self) -> mpi_operator::Mpi {
        mpi_operator::Mpi {
            v1: mpi_operator::v1::V1 {
                kubectl_delivery_image: self.mpi_kubectl_delivery_image.clone(),
            },
            ..mpi_operator::Mpi::default()
        }
    }
}

impl Scheme {
    /// Registers this kind's controller, and its converter when it has several versions.
    pub fn register(self, manager: Manager, config: &FrameworkConfig) -> Result<Manager, LoadError> {
        let manager = self.register_controller(manager, config)?;
        Ok(match self.converter() {
            Some(converter) => manager.convert(converter),
            None => manager,
        })
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
