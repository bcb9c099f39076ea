#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::print_stdout)]
//! Every field Kubeflow's APIs accept, kfop's accept: each kind and version of the CRDs Kubeflow
//! ships (training-operator v1.8.1 and v1.9.0, mpi-operator v0.6.0, read from their Go modules
//! as the peers are built: `testenv/peers/build.sh`) is walked path by path
//! ([`kfop_conformance::schema_paths`]) against kfop's CRD of the same kind and version, as
//! `kfop-operator crds` prints it. A path kfop's schema neither declares (with a type taking
//! Kubeflow's values) nor keeps below a node preserving unknown fields fails the test unless
//! `allowed-differences.yaml` declares it under `schemaPaths`; so does a declaration that
//! matches nothing. Prints a table of the paths per kind and version, and each difference.
use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kfop_conformance::allowed::AllowedDifferences;
use kfop_conformance::operators;
use kfop_conformance::schema_paths::{self, Held, PathResult};
use kfop_testenv::PeerBuild;
use kfop_testenv::peer::{MPI_OPERATOR_V0_6_0, TRAINING_OPERATOR, TRAINING_OPERATOR_V1_9_0};
use serde_json::Value;

/// The kinds and versions each Kubeflow release ships, as `<Kind>/<version>`: the test fails if
/// its CRDs are not found where the peer build puts them.
const RELEASES: [(&str, &[&str]); 3] = [
    (
        TRAINING_OPERATOR,
        &[
            "MPIJob/v1",
            "MXJob/v1",
            "PaddleJob/v1",
            "PyTorchJob/v1",
            "TFJob/v1",
            "XGBoostJob/v1",
        ],
    ),
    (
        TRAINING_OPERATOR_V1_9_0,
        &[
            "JAXJob/v1",
            "MPIJob/v1",
            "PaddleJob/v1",
            "PyTorchJob/v1",
            "TFJob/v1",
            "XGBoostJob/v1",
        ],
    ),
    (MPI_OPERATOR_V0_6_0, &["MPIJob/v2beta1"]),
];

/// One kind and version of one release, compared.
struct Compared {
    release: String,
    schema: String,
    results: Vec<PathResult>,
    /// For each result that is a difference, the index of the entry declaring it.
    declared: BTreeMap<usize, usize>,
}

impl Compared {
    fn count(&self, f: impl Fn(&Held) -> bool) -> usize {
        self.results.iter().filter(|r| f(&r.held)).count()
    }

    fn undeclared(&self) -> impl Iterator<Item = (usize, &PathResult)> {
        self.results
            .iter()
            .enumerate()
            .filter(|(i, r)| r.held.is_difference() && !self.declared.contains_key(i))
    }
}

#[test]
fn every_path_of_kubeflows_schemas_is_in_kfops() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let allowed = AllowedDifferences::load(&root.join("allowed-differences.yaml")).unwrap();
    let bin = operators::operator_bin().unwrap();
    let kfop = operators::kfop_crds(&bin, &[]).unwrap();

    let mut compared = Vec::new();
    for (peer, expected) in RELEASES {
        let build = PeerBuild::locate_or_build(peer).unwrap();
        let release = format!("{} {}", build.name(), build.version());
        let mut schemas = Vec::new();
        for crd in build.crds().unwrap() {
            if crd.spec.group != "kubeflow.org" {
                continue;
            }
            for version in &crd.spec.versions {
                let schema = format!("{}/{}", crd.spec.names.kind, version.name);
                let theirs = open_api_schema(&crd, &version.name)
                    .unwrap_or_else(|| panic!("{release}: {schema} has no openAPIV3Schema"));
                let ours = kfop
                    .iter()
                    .find(|c| c.metadata.name == crd.metadata.name)
                    .and_then(|c| open_api_schema(c, &version.name))
                    .unwrap_or_else(|| panic!("kfop serves no {schema} ({release} does)"));
                let results = schema_paths::compare(&theirs, &ours);
                let declared = results
                    .iter()
                    .enumerate()
                    .filter_map(|(i, r)| {
                        let (kubeflow, kfop) = r.held.values(&r.kubeflow_type)?;
                        let entry =
                            allowed.find_schema_path(&release, &schema, &r.path, (&kubeflow, &kfop))?;
                        Some((i, entry))
                    })
                    .collect();
                schemas.push(schema.clone());
                compared.push(Compared {
                    release: release.clone(),
                    schema,
                    results,
                    declared,
                });
            }
        }
        schemas.sort();
        assert_eq!(schemas, expected, "{release}: the kinds and versions of its CRDs");
    }

    println!("{}", summary(&compared));
    let undeclared: Vec<String> = compared.iter().flat_map(undeclared_lines).collect();
    if !undeclared.is_empty() {
        println!(
            "Undeclared: paths of Kubeflow's schemas kfop's lack, type otherwise or prune (a missing \
             subtree once, at its root):\n{}\n",
            undeclared.join("\n")
        );
    }
    let stale: Vec<String> = (0..allowed.schema_paths.len())
        .filter(|entry| !compared.iter().any(|c| c.declared.values().any(|e| e == entry)))
        .map(|entry| format!("{:?}", allowed.schema_paths[entry]))
        .collect();
    for c in &compared {
        assert!(
            c.count(|h| *h == Held::Declared) > 10,
            "{} {}: almost nothing compared; is kfop's schema empty?",
            c.release,
            c.schema
        );
    }
    assert!(
        undeclared.is_empty(),
        "{} subtrees of Kubeflow's schemas are not in kfop's: add the fields, or declare them under \
         schemaPaths in conformance/allowed-differences.yaml",
        undeclared.len()
    );
    assert!(
        stale.is_empty(),
        "schemaPaths entries that match no difference (remove them): {stale:#?}"
    );
}

/// The `openAPIV3Schema` of `version`, as JSON.
fn open_api_schema(crd: &CustomResourceDefinition, version: &str) -> Option<Value> {
    let version = crd.spec.versions.iter().find(|v| v.name == version)?;
    let schema = version.schema.as_ref()?.open_api_v3_schema.as_ref()?;
    serde_json::to_value(schema).ok()
}

/// A Markdown table of the paths per release, kind and version.
fn summary(compared: &[Compared]) -> String {
    let mut out = String::from(
        "| Kubeflow | schema | paths | in kfop's schema | kept as unknown fields | implicit | missing | type differs | unknown fields dropped | declared differences | undeclared |\n\
         |---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n",
    );
    let mut totals = [0usize; 9];
    for c in compared {
        let row = [
            c.results.len(),
            c.count(|h| *h == Held::Declared),
            c.count(|h| *h == Held::Preserved),
            c.count(|h| *h == Held::Implicit),
            c.count(|h| *h == Held::Missing),
            c.count(|h| matches!(h, Held::TypeDiffers { .. })),
            c.count(|h| *h == Held::UnknownFieldsDropped),
            c.declared.len(),
            c.undeclared().count(),
        ];
        for (total, n) in totals.iter_mut().zip(row) {
            *total += n;
        }
        out.push_str(&format!("| {} | {} | {} |\n", c.release, c.schema, cells(&row)));
    }
    out.push_str(&format!("| **all** | | {} |\n", cells(&totals)));
    out
}

fn cells(row: &[usize]) -> String {
    row.iter().map(usize::to_string).collect::<Vec<_>>().join(" | ")
}

/// One line per undeclared difference, a missing subtree once, at its root, with its number of
/// paths.
fn undeclared_lines(c: &Compared) -> Vec<String> {
    let mut lines: Vec<(String, String, usize)> = Vec::new();
    let mut missing_root: Option<&str> = None;
    for (_, r) in c.undeclared() {
        let (kubeflow, kfop) = r.held.values(&r.kubeflow_type).unwrap_or_default();
        if let (Some(root), Some((_, _, count))) = (missing_root, lines.last_mut())
            && r.held == Held::Missing
            && is_below(&r.path, root)
        {
            *count += 1;
            continue;
        }
        missing_root = (r.held == Held::Missing).then_some(r.path.as_str());
        lines.push((r.path.clone(), format!("Kubeflow {kubeflow}, kfop {kfop}"), 1));
    }
    lines
        .into_iter()
        .map(|(path, values, count)| {
            format!(
                "  {} {}: {path} ({values}; {count} path{})",
                c.release,
                c.schema,
                if count == 1 { "" } else { "s" }
            )
        })
        .collect()
}

/// Whether `path` is below `root` (`spec.a.b`, `spec.a[*]`, `spec.a{*}` below `spec.a`).
fn is_below(path: &str, root: &str) -> bool {
    path.strip_prefix(root)
        .is_some_and(|rest| rest.starts_with(['.', '[', '{']))
}
