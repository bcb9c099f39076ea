#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The conversion webhook out of cluster, two replicas on the real plane: each has its own URL,
//! and the CRD keeps naming the first while it answers (every repoint closes every watch of the
//! kind), then names the second once the first is gone.
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kfop_runtime::kube::Client;
use kfop_runtime::kube::api::Api;
use kfop_runtime::webhook::{self, Converter, Endpoint, Policy, WebhookOptions};
use kfop_testenv::{TestEnv, wait};
use serde_json::json;

const CRD: &str = "widgets.webhook.kfop.dev";

#[derive(Debug)]
struct Renamer;

impl Converter for Renamer {
    fn crd(&self) -> &str {
        CRD
    }
    fn group_kind(&self) -> (&str, &str) {
        ("webhook.kfop.dev", "Widget")
    }
    fn convert(&self, mut object: serde_json::Value, to: &str) -> Result<serde_json::Value, String> {
        object["apiVersion"] = json!(to);
        Ok(object)
    }
}

fn crd() -> CustomResourceDefinition {
    let version = |name: &str, storage: bool| {
        json!({"name": name, "served": true, "storage": storage,
               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
    };
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD},
        "spec": {"group": "webhook.kfop.dev", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [version("v1", true), version("v2", false)]},
    }))
    .unwrap()
}

/// One replica's webhook at its own loopback URL; dropping the sender stops it.
fn replica(client: Client, ns: &str) -> (String, tokio::sync::oneshot::Sender<()>) {
    let listener = webhook::bind(SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let options = WebhookOptions {
        namespace: ns.to_owned(),
        secret_name: "widgets-webhook".to_owned(),
        endpoint: Endpoint::Url(url.clone()),
        policy: Policy {
            validity: Duration::from_secs(3600),
        },
    };
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let converters: webhook::Converters = Arc::new(vec![Arc::new(Renamer)]);
    tokio::spawn(webhook::serve(client, options, converters, listener, async {
        let _ = rx.await;
    }));
    (url, tx)
}

async fn named_url(crds: &Api<CustomResourceDefinition>) -> Option<String> {
    let crd = crds.get(CRD).await.ok()?;
    crd.spec.conversion?.webhook?.client_config?.url
}

async fn until_named(crds: &Api<CustomResourceDefinition>, url: &str, within: Duration) {
    let wanted = format!("{url}/convert");
    wait::until(&format!("the CRD to name {wanted}"), within, || async {
        Ok((named_url(crds).await.as_deref() == Some(wanted.as_str())).then_some(()))
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_crd_keeps_a_live_replica_and_moves_off_a_dead_one() {
    let env = TestEnv::shared().unwrap();
    env.install_crds([crd()]).await.unwrap();
    let ns = env.namespace("webhook").await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(ns.client());

    let (first, stop_first) = replica(ns.client(), ns.name());
    until_named(&crds, &first, Duration::from_secs(30)).await;
    let (second, _keep_second) = replica(ns.client(), ns.name());
    // A 1-hour validity checks every 60 s: the second's first pass (at once) and the first's
    // passes in 70 s would each have repointed the CRD before.
    let until = Instant::now() + Duration::from_secs(70);
    while Instant::now() < until {
        assert_eq!(
            named_url(&crds).await,
            Some(format!("{first}/convert")),
            "a second replica took the CRD from a live first"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    drop(stop_first);
    let stopped = Instant::now();
    until_named(&crds, &second, Duration::from_secs(90)).await;
    println!(
        "the CRD names the second replica {:.1} s after the first stopped",
        stopped.elapsed().as_secs_f64()
    );
    ns.delete().await.unwrap();
}
