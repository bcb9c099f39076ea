#![allow(clippy::unwrap_used, clippy::expect_used)]
//! What the macro generates for the example kinds: the CRDs (checked in as YAML, with a drift
//! check), the replica-type enums and the `TrainingJob` glue.
mod kinds;

use std::path::PathBuf;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kfop_runtime::api::{ReplicaSpec, RestartPolicy, RunPolicy};
use kfop_runtime::kube::CustomResourceExt;
use kfop_runtime::{FrameworkPort, Role, TrainingJob};
use kinds::pytorchjob::{ParsePyTorchJobReplicaTypeError, PyTorchJob, PyTorchJobReplicaType, PyTorchJobSpec};
use kinds::tfjob::{TFJob, TFJobReplicaType};
use serde_json::{Value, json};

const BLESS: &str = "KFOP_BLESS";

fn crds() -> [CustomResourceDefinition; 2] {
    [PyTorchJob::crd(), TFJob::crd()]
}

fn committed(crd: &CustomResourceDefinition) -> PathBuf {
    let plural = &crd.spec.names.plural;
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/crds/{plural}.yaml"))
}

/// The checked-in CRD YAML is what the types generate (`KFOP_BLESS=1` rewrites it), and it
/// loads back as the same CRD (e.g. for `kubectl apply -f`).
#[test]
fn committed_crds_match_the_types() {
    let mut drifted = Vec::new();
    for crd in crds() {
        let yaml = serde_saphyr::to_string(&crd).unwrap();
        let path = committed(&crd);
        if std::env::var_os(BLESS).is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &yaml).unwrap();
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            drifted.push(format!("{} (missing)", path.display()));
            continue;
        };
        if text != yaml {
            drifted.push(path.display().to_string());
            continue;
        }
        let parsed: CustomResourceDefinition = serde_saphyr::from_str(&text).unwrap();
        assert!(parsed == crd, "{} does not load back as the CRD", path.display());
    }
    assert!(
        drifted.is_empty(),
        "CRD drifted; run `{BLESS}=1 cargo test -p kfop-derive --test generated` and commit: {}",
        drifted.join(", ")
    );
}

/// Pod templates stay `x-kubernetes-preserve-unknown-fields`, so each CRD is far below the
/// 256 KiB an annotation (client-side `kubectl apply`) may hold.
#[test]
fn crds_are_small() {
    for crd in crds() {
        let size = serde_json::to_vec(&crd).unwrap().len();
        assert!(size < 100 * 1024, "{} is {size} bytes", crd.spec.names.plural);
    }
}

#[test]
fn crd_names_columns_and_subresources() {
    let crd = serde_json::to_value(PyTorchJob::crd()).unwrap();
    assert_eq!(crd["metadata"]["name"], "pytorchjobs.kubeflow.org");
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    assert_eq!(
        crd["spec"]["names"],
        json!({
            "kind": "PyTorchJob", "plural": "pytorchjobs", "singular": "pytorchjob",
            "shortNames": ["pytorchjob"], "categories": ["kubeflow"],
        })
    );
    let version = &crd["spec"]["versions"][0];
    assert_eq!(version["name"], "v1");
    assert_eq!(
        version["additionalPrinterColumns"],
        json!([
            { "name": "State", "type": "string", "jsonPath": ".status.conditions[-1:].type" },
            { "name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp" },
        ])
    );
    assert_eq!(
        version["subresources"],
        json!({
            "status": {},
            "scale": {
                "specReplicasPath": ".spec.pytorchReplicaSpecs.Worker.replicas",
                "statusReplicasPath": ".status.replicaStatuses.Worker.active",
                "labelSelectorPath": ".status.replicaStatuses.Worker.selector",
            },
        })
    );
    // Defaults: plural from the kind, category kubeflow, no scale unless asked for.
    let tf = serde_json::to_value(TFJob::crd()).unwrap();
    assert_eq!(tf["spec"]["names"]["plural"], "tfjobs");
    assert_eq!(tf["spec"]["names"]["categories"], json!(["kubeflow"]));
    assert_eq!(tf["spec"]["versions"][0]["subresources"], json!({ "status": {} }));
}

#[test]
fn replica_types_parse_in_any_case_and_print_kubeflow_names() {
    assert_eq!("worker".parse(), Ok(PyTorchJobReplicaType::Worker));
    assert_eq!("MASTER".parse(), Ok(PyTorchJobReplicaType::Master));
    assert_eq!("ps".parse(), Ok(TFJobReplicaType::PS));
    let err = "Launcher".parse::<PyTorchJobReplicaType>().unwrap_err();
    assert_eq!(err, ParsePyTorchJobReplicaTypeError("Launcher".to_owned()));
    assert_eq!(
        err.to_string(),
        "unknown PyTorchJob replica type `Launcher`; expected one of Master, Worker (any letter case)"
    );
    assert_eq!(PyTorchJobReplicaType::Worker.to_string(), "Worker");
    assert_eq!(TFJobReplicaType::PS.as_str(), "PS");
    assert_eq!(
        TFJobReplicaType::ALL.map(TFJobReplicaType::as_str),
        ["PS", "Worker", "Chief", "Master", "Evaluator"]
    );
    assert_eq!(
        serde_json::to_value(PyTorchJobReplicaType::Master).unwrap(),
        "Master"
    );
    assert_eq!(
        serde_json::from_value::<PyTorchJobReplicaType>(json!("worker")).unwrap(),
        PyTorchJobReplicaType::Worker
    );
    assert!(serde_json::from_value::<PyTorchJobReplicaType>(json!("chief")).is_err());
}

#[test]
fn framework_info_comes_from_the_attribute() {
    let info = PyTorchJob::framework_info();
    assert_eq!(
        (
            info.controller_name.as_str(),
            info.framework_name.as_str(),
            info.default_container.as_str(),
            info.default_port.clone(),
        ),
        (
            "pytorchjob-controller",
            "pytorch",
            "pytorch",
            Some(FrameworkPort::new("pytorchjob-port", 23456))
        )
    );
    assert_eq!(
        info.roles,
        [
            Role::new("Master", RestartPolicy::OnFailure).master(),
            Role::new("Worker", RestartPolicy::OnFailure),
        ]
    );
    let tf = TFJob::framework_info();
    assert_eq!(
        (tf.default_container.as_str(), tf.default_port.clone()),
        ("tensorflow", Some(FrameworkPort::new("tfjob-port", 2222)))
    );
    let never = |name| Role::new(name, RestartPolicy::Never);
    assert_eq!(
        tf.roles,
        [
            never("PS"),
            never("Worker"),
            never("Chief").master(),
            never("Master").master(),
            never("Evaluator")
        ]
    );
    // One static per kind: every call returns the same value.
    assert!(std::ptr::eq(PyTorchJob::framework_info(), info));
}

#[test]
fn training_job_reads_the_spec_with_camel_case_json() {
    let spec = PyTorchJobSpec {
        run_policy: RunPolicy {
            backoff_limit: Some(3),
            ..RunPolicy::default()
        },
        pytorch_replica_specs: [("Worker".to_owned(), ReplicaSpec::default())].into(),
        nproc_per_node: Some("auto".to_owned()),
    };
    let job = PyTorchJob::new("mnist", spec);
    assert_eq!(job.replica_specs().keys().collect::<Vec<_>>(), ["Worker"]);
    assert_eq!(job.run_policy().backoff_limit, Some(3));
    assert!(TrainingJob::status(&job).is_none());
    let value = serde_json::to_value(&job).unwrap();
    assert_eq!(value["apiVersion"], "kubeflow.org/v1");
    assert_eq!(value["kind"], "PyTorchJob");
    assert_eq!(
        value["spec"],
        json!({
            "runPolicy": { "backoffLimit": 3 },
            "pytorchReplicaSpecs": { "Worker": { "template": {} } },
            "nprocPerNode": "auto",
        })
    );
}

/// Where a schema carries `x-kubernetes-validations`, as JSON pointers below `node`.
fn validated_paths(node: &Value, path: &str, out: &mut Vec<String>) {
    let Some(object) = node.as_object() else {
        return;
    };
    if object.contains_key("x-kubernetes-validations") {
        out.push(path.to_owned());
    }
    for (key, child) in object {
        validated_paths(child, &format!("{path}/{key}"), out);
    }
}

/// Every admission rule of the macro lands in the CRD (the schema transform skips a pointer that
/// does not resolve, so a renamed runtime field would otherwise drop its rule silently).
#[test]
fn every_rule_reaches_the_crd() {
    let crd = serde_json::to_value(PyTorchJob::crd()).unwrap();
    let root = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let spec = &root["properties"]["spec"];
    // The rules on metadata.name.
    assert_eq!(root["x-kubernetes-validations"].as_array().unwrap().len(), 2);
    let template =
        &spec["properties"]["pytorchReplicaSpecs"]["additionalProperties"]["properties"]["template"];
    assert_eq!(template["required"], json!(["spec"]));
    assert_eq!(
        template["properties"]["spec"]["properties"]["containers"]["items"]["required"],
        json!(["image", "name"])
    );
    let mut paths = Vec::new();
    validated_paths(spec, "", &mut paths);
    paths.sort();
    assert_eq!(
        paths,
        [
            "/properties/pytorchReplicaSpecs",
            "/properties/pytorchReplicaSpecs/additionalProperties/properties/replicas",
            "/properties/runPolicy",
            "/properties/runPolicy/properties/activeDeadlineSeconds",
            "/properties/runPolicy/properties/backoffLimit",
            "/properties/runPolicy/properties/managedBy",
            "/properties/runPolicy/properties/schedulingPolicy/properties/queue",
            "/properties/runPolicy/properties/ttlSecondsAfterFinished",
        ]
    );
    assert_eq!(spec["properties"]["pytorchReplicaSpecs"]["maxProperties"], 2);
}
