//! MPIJob between `kubeflow.org/v1` (training-operator's) and `kubeflow.org/v2beta1`
//! (mpi-operator's, stored), losslessly: both share `slotsPerWorker`, `runPolicy`,
//! `mpiReplicaSpecs` and the status; a field one version lacks travels in an annotation of the
//! other and comes back on the way home. The version a job was created in is recorded here too
//! (the only admission step every v1 create passes through), so the job runs with the
//! semantics of the API its author used, never guessed from its fields.
use kfop_runtime::serde_json::{Map, Value};
use kfop_runtime::webhook::Converter;

pub const GROUP: &str = "kubeflow.org";
pub const V1: &str = "v1";
pub const V2BETA1: &str = "v2beta1";
/// The CRD both versions share.
pub const CRD: &str = "mpijobs.kubeflow.org";

/// Which API a job was created in: `v1` on a stored object created as v1; absent on one created
/// as v2beta1 (a create in the stored version passes no conversion), which reads in v1 as
/// `v2beta1`.
pub const CREATED_AS: &str = "kfop.dev/created-as";

/// Spec fields only one version has.
const ONLY_V1: [&str; 2] = ["cleanPodPolicy", "mainContainer"];
const ONLY_V2BETA1: [&str; 4] = [
    "runLauncherAsWorker",
    "sshAuthMountPath",
    "launcherCreationPolicy",
    "mpiImplementation",
];

/// The annotation holding `version`'s fields while the object is in the other version.
pub fn kept_fields_annotation(version: &str) -> String {
    format!("kfop.dev/mpijob-{version}-fields")
}

/// Converts MPIJobs for the webhook.
#[derive(Debug, Clone, Copy, Default)]
pub struct MpiConversion;

impl Converter for MpiConversion {
    fn crd(&self) -> &str {
        CRD
    }

    fn group_kind(&self) -> (&str, &str) {
        (GROUP, "MPIJob")
    }

    fn convert(&self, object: Value, desired_api_version: &str) -> Result<Value, String> {
        convert(object, desired_api_version)
    }
}

/// `object` (an MPIJob in either version) in `desired` (`kubeflow.org/v1` or `.../v2beta1`).
pub fn convert(mut object: Value, desired: &str) -> Result<Value, String> {
    let from = version_of(object["apiVersion"].as_str().unwrap_or_default())
        .ok_or("apiVersion: expected kubeflow.org/v1 or kubeflow.org/v2beta1")?;
    let to = version_of(desired).ok_or_else(|| {
        format!("desired version {desired}: expected kubeflow.org/v1 or kubeflow.org/v2beta1")
    })?;
    if from == to {
        return Ok(object);
    }
    let (leaving, arriving): (&[&str], _) = match from {
        V1 => (&ONLY_V1, kept_fields_annotation(V2BETA1)),
        _ => (&ONLY_V2BETA1, kept_fields_annotation(V1)),
    };
    let root = object.as_object_mut().ok_or("the object is not a JSON object")?;
    let mut annotations = take_annotations(root)?;

    let spec = match root.get_mut("spec") {
        Some(Value::Object(spec)) => Some(spec),
        Some(_) => return Err("spec: expected an object".into()),
        None => None,
    };
    let mut kept = Map::new();
    if let Some(spec) = spec {
        for field in leaving {
            if let Some(value) = spec.remove(*field) {
                kept.insert((*field).to_owned(), value);
            }
        }
        if let Some(text) = annotations.remove(&arriving) {
            let back: Map<String, Value> = match text {
                Value::String(s) => kfop_runtime::serde_json::from_str(&s)
                    .map_err(|e| format!("metadata.annotations[{arriving}]: not a JSON object ({e})"))?,
                _ => return Err(format!("metadata.annotations[{arriving}]: expected a string")),
            };
            spec.extend(back);
        }
    } else {
        annotations.remove(&arriving);
    }
    let leaving_annotation = kept_fields_annotation(from);
    if kept.is_empty() {
        annotations.remove(&leaving_annotation);
    } else {
        let text = kfop_runtime::serde_json::to_string(&kept).map_err(|e| e.to_string())?;
        annotations.insert(leaving_annotation, Value::String(text));
    }

    // Absent means v2beta1 in storage (a v2beta1 create is never converted), so the stored
    // form drops `v2beta1` and a v1 create without the mark gets `v1`.
    match (to, annotations.get(CREATED_AS).and_then(Value::as_str)) {
        (V2BETA1, Some(V2BETA1)) => {
            annotations.remove(CREATED_AS);
        }
        (V2BETA1, None) => {
            annotations.insert(CREATED_AS.to_owned(), Value::String(V1.to_owned()));
        }
        (V1, None) => {
            annotations.insert(CREATED_AS.to_owned(), Value::String(V2BETA1.to_owned()));
        }
        _ => {}
    }
    put_annotations(root, annotations);
    root.insert("apiVersion".to_owned(), Value::String(format!("{GROUP}/{to}")));
    Ok(object)
}

/// The version of a `kubeflow.org/...` apiVersion this CRD serves.
fn version_of(api_version: &str) -> Option<&'static str> {
    match api_version.strip_prefix("kubeflow.org/")? {
        V1 => Some(V1),
        V2BETA1 => Some(V2BETA1),
        _ => None,
    }
}

fn take_annotations(root: &mut Map<String, Value>) -> Result<Map<String, Value>, String> {
    let metadata = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let metadata = metadata.as_object_mut().ok_or("metadata: expected an object")?;
    match metadata.remove("annotations") {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(a)) => Ok(a),
        Some(_) => Err("metadata.annotations: expected an object".into()),
    }
}

fn put_annotations(root: &mut Map<String, Value>, annotations: Map<String, Value>) {
    if let Some(Value::Object(metadata)) = root.get_mut("metadata")
        && !annotations.is_empty()
    {
        metadata.insert("annotations".to_owned(), Value::Object(annotations));
    }
}

/// A field only `version` has, of a job read in the other version (kept in the annotation
/// [`kept_fields_annotation`]); `None` when absent or the annotation is not a JSON object.
pub fn kept_field(
    annotations: &std::collections::BTreeMap<String, String>,
    version: &str,
    field: &str,
) -> Option<Value> {
    let text = annotations.get(&kept_fields_annotation(version))?;
    let mut fields: Map<String, Value> = kfop_runtime::serde_json::from_str(text).ok()?;
    fields.remove(field)
}

/// The API a stored (v2beta1) MPIJob was created in.
pub fn created_as(annotations: Option<&std::collections::BTreeMap<String, String>>) -> &'static str {
    match annotations.and_then(|a| a.get(CREATED_AS)).map(String::as_str) {
        Some(V1) => V1,
        _ => V2BETA1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kfop_runtime::serde_json::json;

    fn v1_job() -> Value {
        json!({
            "apiVersion": "kubeflow.org/v1", "kind": "MPIJob",
            "metadata": {"name": "pi", "namespace": "ns", "labels": {"a": "b"}},
            "spec": {
                "slotsPerWorker": 2, "cleanPodPolicy": "Running", "mainContainer": "mpi",
                "runPolicy": {"backoffLimit": 1},
                "mpiReplicaSpecs": {"Launcher": {"replicas": 1}, "Worker": {"replicas": 2}},
            },
            "status": {"conditions": [{"type": "Created", "status": "True"}]},
        })
    }

    #[test]
    fn a_v1_create_is_marked_and_keeps_its_v1_fields() {
        let stored = convert(v1_job(), "kubeflow.org/v2beta1").unwrap();
        assert_eq!(stored["apiVersion"], "kubeflow.org/v2beta1");
        let annotations = &stored["metadata"]["annotations"];
        assert_eq!(annotations[CREATED_AS], "v1");
        let kept: Value =
            kfop_runtime::serde_json::from_str(annotations["kfop.dev/mpijob-v1-fields"].as_str().unwrap())
                .unwrap();
        assert_eq!(kept, json!({"cleanPodPolicy": "Running", "mainContainer": "mpi"}));
        assert_eq!(stored["spec"].get("mainContainer"), None);
        assert_eq!(stored["spec"]["slotsPerWorker"], 2);
        assert_eq!(stored["status"], v1_job()["status"]);
        assert_eq!(stored["metadata"]["labels"], json!({"a": "b"}));

        let back = convert(stored, "kubeflow.org/v1").unwrap();
        let mut expected = v1_job();
        expected["metadata"]["annotations"] = json!({CREATED_AS: "v1"});
        assert_eq!(back, expected);
    }

    #[test]
    fn a_v2beta1_job_reads_in_v1_and_comes_back_unchanged() {
        let stored = json!({
            "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": {"name": "pi"},
            "spec": {"slotsPerWorker": 1, "sshAuthMountPath": "/home/mpiuser/.ssh",
                      "mpiReplicaSpecs": {"Launcher": {}}},
        });
        let v1 = convert(stored.clone(), "kubeflow.org/v1").unwrap();
        assert_eq!(v1["metadata"]["annotations"][CREATED_AS], "v2beta1");
        assert_eq!(v1["spec"].get("sshAuthMountPath"), None);
        assert_eq!(convert(v1, "kubeflow.org/v2beta1").unwrap(), stored);
    }

    #[test]
    fn bad_input_names_the_field() {
        let err = convert(json!({"apiVersion": "kubeflow.org/v3"}), "kubeflow.org/v1").unwrap_err();
        assert!(err.starts_with("apiVersion"), "{err}");
        let err = convert(v1_job(), "kubeflow.org/v9").unwrap_err();
        assert!(err.contains("desired version"), "{err}");
        let mut job = v1_job();
        job["metadata"]["annotations"] = json!({"kfop.dev/mpijob-v2beta1-fields": "[1]"});
        let err = convert(job, "kubeflow.org/v2beta1").unwrap_err();
        assert!(err.contains("kfop.dev/mpijob-v2beta1-fields"), "{err}");
    }

    #[test]
    fn created_as_reads_the_mark() {
        use std::collections::BTreeMap;
        assert_eq!(created_as(None), V2BETA1);
        let v1 = BTreeMap::from([(CREATED_AS.to_owned(), "v1".to_owned())]);
        assert_eq!(created_as(Some(&v1)), V1);
    }
}
