//! The conversion between MPIJob v1 and v2beta1 is lossless: any object the API server can hand
//! the webhook comes back unchanged from a round trip through the other version.
use mpi_operator::convert::{CREATED_AS, convert};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const SHARED: [&str; 3] = ["slotsPerWorker", "runPolicy", "mpiReplicaSpecs"];
const ONLY_V1: [&str; 2] = ["cleanPodPolicy", "mainContainer"];
const ONLY_V2BETA1: [&str; 4] = [
    "runLauncherAsWorker",
    "sshAuthMountPath",
    "launcherCreationPolicy",
    "mpiImplementation",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i32>().prop_map(|n| json!(n)),
        any::<bool>().prop_map(|b| json!(b)),
        "[a-zA-Z0-9/._-]{0,12}".prop_map(|s| json!(s)),
        Just(Value::Null),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// An object of `version` with any subset of its spec fields, any user annotations and labels,
/// any status, and the mark a read in that version carries (`v1` reads always carry one).
fn object(version: &'static str) -> impl Strategy<Value = Value> {
    let own: &'static [&'static str] = if version == "v1" { &ONLY_V1 } else { &ONLY_V2BETA1 };
    let fields: Vec<&'static str> = SHARED.iter().chain(own).copied().collect();
    let spec = prop::collection::vec((prop::sample::select(fields), value()), 0..6);
    let annotations = prop::collection::btree_map("[a-z]{1,6}\\.io/[a-z]{1,6}", "[ -~]{0,16}", 0..3);
    let mark = if version == "v1" {
        prop::sample::select(vec![Some("v1"), Some("v2beta1")]).boxed()
    } else {
        prop::sample::select(vec![None, Some("v1")]).boxed()
    };
    (spec, annotations, mark, prop::option::of(value()), any::<bool>()).prop_map(
        move |(spec, annotations, mark, status, with_spec)| {
            let mut annotations: Map<String, Value> =
                annotations.into_iter().map(|(k, v)| (k, json!(v))).collect();
            if let Some(mark) = mark {
                annotations.insert(CREATED_AS.to_owned(), json!(mark));
            }
            let mut metadata = json!({"name": "job", "namespace": "ns", "uid": "u", "labels": {"x": "y"}});
            if !annotations.is_empty() {
                metadata["annotations"] = Value::Object(annotations);
            }
            let mut object = json!({"apiVersion": format!("kubeflow.org/{version}"), "kind": "MPIJob", "metadata": metadata});
            if with_spec {
                object["spec"] = Value::Object(spec.into_iter().map(|(k, v)| (k.to_owned(), v)).collect());
            }
            if let Some(status) = status {
                object["status"] = status;
            }
            object
        },
    )
}

proptest! {
    #[test]
    fn v1_to_v2beta1_and_back(original in object("v1")) {
        let stored = convert(original.clone(), "kubeflow.org/v2beta1").unwrap();
        prop_assert_eq!(&stored["apiVersion"], "kubeflow.org/v2beta1");
        for field in ONLY_V1 {
            prop_assert!(stored["spec"].get(field).is_none());
        }
        prop_assert_eq!(&stored["metadata"]["labels"], &original["metadata"]["labels"]);
        prop_assert_eq!(&stored["status"], &original["status"]);
        prop_assert_eq!(convert(stored, "kubeflow.org/v1").unwrap(), original);
    }

    #[test]
    fn v2beta1_to_v1_and_back(original in object("v2beta1")) {
        let v1 = convert(original.clone(), "kubeflow.org/v1").unwrap();
        prop_assert_eq!(&v1["apiVersion"], "kubeflow.org/v1");
        for field in ONLY_V2BETA1 {
            prop_assert!(v1["spec"].get(field).is_none());
        }
        prop_assert!(v1["metadata"]["annotations"][CREATED_AS].is_string());
        prop_assert_eq!(convert(v1, "kubeflow.org/v2beta1").unwrap(), original);
    }

    #[test]
    fn a_create_in_v1_is_marked_v1(mut original in object("v1")) {
        if let Some(Value::Object(a)) = original["metadata"].get_mut("annotations") {
            a.remove(CREATED_AS);
        }
        let stored = convert(original, "kubeflow.org/v2beta1").unwrap();
        prop_assert_eq!(&stored["metadata"]["annotations"][CREATED_AS], "v1");
    }
}
