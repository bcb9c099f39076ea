//! One sample job per bundled kind (Kubeflow's examples, trimmed), as dynamic objects with the
//! API resource to create them through.
use kfop_runtime::kube::api::{ApiResource, DynamicObject};

use crate::schemes::Scheme;

const SAMPLES: [(Scheme, &str, &str); 7] = [
    (Scheme::TfJob, "tfjob.yaml", include_str!("../samples/tfjob.yaml")),
    (
        Scheme::PyTorchJob,
        "pytorchjob.yaml",
        include_str!("../samples/pytorchjob.yaml"),
    ),
    (
        Scheme::XgBoostJob,
        "xgboostjob.yaml",
        include_str!("../samples/xgboostjob.yaml"),
    ),
    (
        Scheme::PaddleJob,
        "paddlejob.yaml",
        include_str!("../samples/paddlejob.yaml"),
    ),
    (
        Scheme::JaxJob,
        "jaxjob.yaml",
        include_str!("../samples/jaxjob.yaml"),
    ),
    (Scheme::MxJob, "mxjob.yaml", include_str!("../samples/mxjob.yaml")),
    (
        Scheme::MpiJob,
        "mpijob.yaml",
        include_str!("../samples/mpijob.yaml"),
    ),
];

#[derive(Debug, thiserror::Error)]
#[error("sample {file}: {message}")]
pub struct SampleError {
    pub file: &'static str,
    pub message: String,
}

/// The API resource of `scheme`'s job kind, in the version its CRD serves first.
pub fn api_resource(scheme: Scheme) -> ApiResource {
    let crd = crate::crds::of(scheme);
    let version = crd
        .spec
        .versions
        .first()
        .map(|v| v.name.clone())
        .unwrap_or_default();
    ApiResource {
        group: crd.spec.group.clone(),
        version: version.clone(),
        api_version: format!("{}/{version}", crd.spec.group),
        kind: crd.spec.names.kind.clone(),
        plural: crd.spec.names.plural.clone(),
    }
}

/// The sample job of `scheme` and the file it comes from.
pub fn sample(scheme: Scheme) -> Result<(&'static str, DynamicObject), SampleError> {
    let (_, file, text) = SAMPLES
        .iter()
        .find(|(s, ..)| *s == scheme)
        .ok_or_else(|| SampleError {
            file: "-",
            message: format!("no sample for {scheme:?}"),
        })?;
    let error = |message: String| SampleError { file, message };
    let value: kfop_runtime::serde_json::Value =
        serde_saphyr::from_str(text).map_err(|e| error(e.to_string()))?;
    let object = kfop_runtime::serde_json::from_value(value).map_err(|e| error(e.to_string()))?;
    Ok((file, object))
}

/// The replica specs of a job object: the one `spec` field ending in `ReplicaSpecs`.
pub fn replica_specs_mut(
    job: &mut DynamicObject,
) -> Option<&mut kfop_runtime::serde_json::Map<String, kfop_runtime::serde_json::Value>> {
    job.data
        .get_mut("spec")?
        .as_object_mut()?
        .iter_mut()
        .find(|(key, _)| key.ends_with("ReplicaSpecs"))?
        .1
        .as_object_mut()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_sample_of_its_kind() {
        for (_, scheme) in Scheme::ALL {
            let (file, mut job) = sample(scheme).unwrap();
            let resource = api_resource(scheme);
            let types = job.types.clone().unwrap();
            assert_eq!(types.kind, resource.kind, "{file}");
            assert_eq!(types.api_version, resource.api_version, "{file}");
            assert!(!replica_specs_mut(&mut job).unwrap().is_empty(), "{file}");
        }
    }
}
