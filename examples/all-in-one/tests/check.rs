#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::print_stdout)]
//! `kfop-operator check` on the local plane in each broken state a platform team meets (no CRDs,
//! Kubeflow's own CRDs, a conversion webhook nobody serves, RBAC not granted, Kubeflow's
//! operator still running), each named on its own line and fixed in turn until the check exits
//! 0; and the operator refusing to start out of cluster against a CRD whose conversion webhook
//! nothing serves, with one line naming the flag.
mod common;

use std::collections::BTreeSet;
use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Stdio};
use std::time::Instant;

use kfop_operator::schemes::{self, Scheme};
use kfop_runtime::k8s_openapi::api::apps::v1::Deployment;
use kfop_runtime::k8s_openapi::api::core::v1::ServiceAccount;
use kfop_runtime::k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kfop_runtime::kube::Api;
use kfop_runtime::kube::api::{Patch, PatchParams, PostParams};
use kfop_testenv::peer::PeerBuild;
use kfop_testenv::{TestEnv, wait};
use serde_json::{Value, json};

const OPERATOR: &str = env!("CARGO_BIN_EXE_kfop-operator");
const SERVICE_ACCOUNT: &str = "system:serviceaccount:kubeflow:kfop-operator";

fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

/// `kfop-operator check [extra]`: its exit code and its lines.
fn check(env: &TestEnv, extra: &[&str]) -> (bool, Vec<String>) {
    let out = Command::new(OPERATOR)
        .arg("check")
        .args(extra)
        .env("KUBECONFIG", env.kubeconfig())
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() || out.status.code() == Some(1),
        "check crashed ({}): {stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    println!("$ kfop-operator check {}\n{stdout}", extra.join(" "));
    (out.status.success(), stdout.lines().map(str::to_owned).collect())
}

fn failed<'a>(lines: &'a [String], prefix: &str) -> Vec<&'a String> {
    lines
        .iter()
        .filter(|l| l.starts_with(&format!("FAIL {prefix}")))
        .collect()
}

fn line_with<'a>(lines: &'a [String], text: &str) -> &'a String {
    lines
        .iter()
        .find(|l| l.contains(text))
        .unwrap_or_else(|| panic!("no line with {text:?} in:\n{}", lines.join("\n")))
}

/// Server-side applies every object of a YAML stream of ServiceAccounts and cluster RBAC.
async fn apply_rbac(env: &TestEnv, yaml: &str) {
    let client = env.client().await.unwrap();
    let params = PatchParams::apply("kfop-check-test").force();
    kfop_testenv::ensure_namespace(&client, kfop_operator::deploy::NAMESPACE)
        .await
        .unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).unwrap();
    for doc in docs {
        let name = doc["metadata"]["name"].as_str().unwrap().to_owned();
        match doc["kind"].as_str().unwrap() {
            "ServiceAccount" => {
                let api: Api<ServiceAccount> =
                    Api::namespaced(client.clone(), kfop_operator::deploy::NAMESPACE);
                api.patch(&name, &params, &Patch::Apply(&doc)).await.unwrap();
            }
            "ClusterRole" => {
                let api: Api<ClusterRole> = Api::all(client.clone());
                api.patch(&name, &params, &Patch::Apply(&doc)).await.unwrap();
            }
            "ClusterRoleBinding" => {
                let api: Api<ClusterRoleBinding> = Api::all(client.clone());
                api.patch(&name, &params, &Patch::Apply(&doc)).await.unwrap();
            }
            other => panic!("unexpected {other} in the RBAC stream"),
        }
    }
}

/// The operator out of cluster, every kind, without `--webhook-url`: it must exit, naming the
/// flag, instead of running against a CRD whose webhook nothing serves.
fn refuses_to_start(env: &TestEnv) {
    let started = Instant::now();
    let out = Command::new("timeout")
        .arg("90")
        .arg(OPERATOR)
        .arg(format!("--metrics-bind-address={}", free_addr()))
        .env("KUBECONFIG", env.kubeconfig())
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("kfop-operator: the CRD mpijobs.kubeflow.org converts between its versions through the webhook at the Service kubeflow/kfop-operator-webhook, which nothing serves: out of cluster, pass --webhook-url="),
        "{stderr}"
    );
    println!(
        "refused to start after {:.1} s: {last}",
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test]
async fn check_names_each_broken_state_and_passes_once_all_are_fixed() {
    let env = TestEnv::shared().unwrap();
    let enabled: BTreeSet<Scheme> = schemes::parse(&[]).unwrap();

    // Nothing installed: every CRD is missing, and a v1 MPIJob cannot be created.
    let (ok, lines) = check(env, &[]);
    assert!(!ok);
    assert!(line_with(&lines, "RBAC is checked as you").contains("--as system:serviceaccount:"));
    assert_eq!(
        failed(&lines, "CRD ").len(),
        enabled.len() + 1,
        "every kind's CRD and the Framework CRD"
    );
    assert!(
        line_with(&lines, "FAIL CRD tfjobs.kubeflow.org")
            .contains("not installed; fix: kfop-operator crds | kubectl apply")
    );
    assert!(line_with(&lines, "FAIL MPIJob kubeflow.org/v1 create").contains("v1 MPIJobs are not served"));

    // Kubeflow's own CRDs, as training-operator v1.8.1 installs them.
    let kubeflow = PeerBuild::locate_or_build("training-operator").unwrap();
    env.install_crds(kubeflow.crds().unwrap()).await.unwrap();
    let (ok, lines) = check(env, &[]);
    assert!(!ok);
    assert!(line_with(&lines, "FAIL CRD pytorchjobs.kubeflow.org").contains("still Kubeflow's own CRD"));

    // kfop's CRDs, MPIJob converted by a webhook nothing serves yet.
    env.install_crds(kfop_operator::crds::all(&enabled))
        .await
        .unwrap();
    let (ok, lines) = check(env, &[]);
    assert!(!ok);
    assert!(failed(&lines, "CRD ").is_empty(), "{lines:?}");
    assert!(line_with(&lines, "FAIL MPIJob kubeflow.org/v1 create").contains("--webhook-url="));
    refuses_to_start(env);

    // The operator with its webhook at a URL the API server reaches.
    let (metrics, webhook) = (free_addr(), free_addr());
    let args = vec![
        format!("--metrics-bind-address={metrics}"),
        format!("--webhook-bind-address={webhook}"),
        format!("--webhook-url=https://{webhook}"),
        "--webhook-namespace=default".to_owned(),
    ];
    let mut operator = common::start_operator(env, &args, metrics, &[]).await;
    let lines = wait::until(
        "the v1 MPIJob dry run to pass through the webhook",
        wait::default_timeout(),
        || async {
            let (_, lines) = check(env, &[]);
            Ok(failed(&lines, "MPIJob").is_empty().then_some(lines))
        },
    )
    .await
    .unwrap();
    assert!(line_with(&lines, "ok   MPIJob kubeflow.org/v1 create").starts_with("ok"));

    // RBAC as the operator's ServiceAccount: nothing granted, then the ClusterRole bound.
    let (ok, lines) = check(env, &["--as", SERVICE_ACCOUNT]);
    assert!(!ok);
    line_with(&lines, &format!("RBAC is checked as {SERVICE_ACCOUNT} (--as)"));
    assert!(
        line_with(&lines, "FAIL RBAC pods (core) cluster-wide")
            .contains("may not create, delete, get, list, patch, watch")
    );
    apply_rbac(env, &kfop_operator::deploy::rbac(&enabled)).await;
    let lines = wait::until("RBAC to be granted", wait::default_timeout(), || async {
        let (_, lines) = check(env, &["--as", SERVICE_ACCOUNT]);
        Ok(failed(&lines, "RBAC").is_empty().then_some(lines))
    })
    .await
    .unwrap();
    assert!(
        lines.iter().filter(|l| l.starts_with("ok   RBAC")).count() >= 10,
        "{lines:?}"
    );

    // Kubeflow's training-operator still deployed, then scaled to zero.
    let client = env.client().await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client, kfop_operator::deploy::NAMESPACE);
    let training_operator: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "training-operator"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "training-operator"}},
                 "template": {"metadata": {"labels": {"app": "training-operator"}},
                              "spec": {"containers": [{"name": "training-operator",
                                                       "image": "kubeflow/training-operator:v1-855e096"}]}}},
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &training_operator)
        .await
        .unwrap();
    let (ok, lines) = check(env, &["--as", SERVICE_ACCOUNT]);
    assert!(!ok);
    assert!(line_with(&lines, "FAIL Deployment kubeflow/training-operator").contains("--replicas=0"));
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("FAIL")).count(),
        1,
        "{lines:?}"
    );
    deployments
        .patch(
            "training-operator",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 0}})),
        )
        .await
        .unwrap();

    // All fixed: every line ok, exit code 0.
    let (ok, lines) = check(env, &["--as", SERVICE_ACCOUNT]);
    assert!(ok, "{lines:?}");
    // The first line says whose RBAC was checked; every line after it is a passed check.
    assert_eq!(lines[0], format!("RBAC is checked as {SERVICE_ACCOUNT} (--as)"));
    assert!(lines[1..].iter().all(|l| l.starts_with("ok ")), "{lines:?}");
    operator.check_alive().unwrap();
}
