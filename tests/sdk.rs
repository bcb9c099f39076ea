#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The Kubeflow Python SDK creates, waits for, lists and deletes a PyTorchJob and a TFJob run by
//! the all-in-one operator (`tests/sdk/test_kubeflow_sdk.py`, with pytest). The Python
//! environment is `$KFOP_SDK_PYTHON`, else `~/.cache/kfop/sdk-venv` that scripts/test.sh creates.
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kfop_operator::schemes;
use kfop_runtime::k8s_openapi::api::core::v1::Pod;
use kfop_runtime::kube::ResourceExt;
use kfop_runtime::kube::api::{Api, ListParams};
use kfop_runtime::testing::Operator;
use kfop_testenv::{TestEnv, pods};

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("KFOP_SDK_PYTHON") {
        return p.into();
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
    let cache = std::env::var_os("KFOP_CACHE_DIR").map_or_else(|| home.join(".cache/kfop"), PathBuf::from);
    cache.join("sdk-venv/bin/python")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubeflow_python_sdk_drives_pytorch_and_tf_jobs() {
    let python = python();
    assert!(
        python.exists(),
        "{} is missing: run scripts/test.sh (it installs kubeflow-training 1.8.1 and pytest), or set KFOP_SDK_PYTHON",
        python.display()
    );
    let env = TestEnv::shared().unwrap();
    let enabled = schemes::parse(&[]).unwrap();
    env.install_crds(enabled.iter().map(|s| kfop_operator::crds::of(*s)))
        .await
        .unwrap();
    let ns = env.namespace("sdk").await.unwrap();
    let operator = Operator::start(ns.client(), ns.name(), |m| kfop_operator::register(m, &enabled));
    // kwok plays the kubelet: "train" each running pod for a moment, then end it with exit 0.
    let pods_api: Api<Pod> = ns.api();
    let driver = tokio::spawn(async move {
        loop {
            if let Ok(list) = pods_api.list(&ListParams::default()).await {
                for pod in list.items.iter().filter(|p| pods::phase(p) == "Running") {
                    if !pod.annotations().contains_key(pods::EXIT_CODE_ANNOTATION) {
                        let _ = pods::finish(&pods_api, &pod.name_any(), 0, 0).await;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("sdk/test_kubeflow_sdk.py");
    let mut pytest = Command::new(&python);
    pytest
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(&script)
        .env("KUBECONFIG", env.kubeconfig())
        .env("KFOP_SDK_NAMESPACE", ns.name());
    let out = tokio::process::Command::from(pytest).output().await.unwrap();
    driver.abort();
    operator.stop().await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "pytest failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("2 passed"), "{stdout}");
}
