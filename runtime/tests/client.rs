#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The operator's client against a real API server that throttles it: a private plane with API
//! Priority and Fairness on (the shared test plane has it off) gives one user a priority level
//! of a few seats that rejects the rest with 429. A
//! plain client sees the 429s; kfop's client (no client-side limit by default) gets every
//! request through, because kube's retry layer waits out each 429's Retry-After.
use std::time::{Duration, Instant};

use futures::future::join_all;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kfop_runtime::client::{self, RateLimit};
use kfop_runtime::kube::api::{Api, ListParams, PostParams};
use kfop_runtime::kube::config::{KubeConfigOptions, Kubeconfig};
use kfop_runtime::kube::{Client, Config};
use kfop_testenv::{ControlPlane, PlaneOptions};
use serde_json::json;

const USER: &str = "kfop-throttled-client";
/// Concurrent requests per round: far more than the priority level's seats.
const REQUESTS: usize = 24;

/// A config acting as [`USER`] (the admin's credentials impersonate it).
async fn throttled_config(plane: &ControlPlane) -> Config {
    let mut kubeconfig = Kubeconfig::read_from(plane.kubeconfig()).unwrap();
    for named in &mut kubeconfig.auth_infos {
        if let Some(auth) = &mut named.auth_info {
            auth.impersonate = Some(USER.to_owned());
        }
    }
    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap()
}

/// `REQUESTS` lists at once; how many came back 429.
async fn too_many(api: &Api<ConfigMap>) -> usize {
    let params = ListParams::default();
    let lists = (0..REQUESTS).map(|_| api.list(&params));
    let results = join_all(lists).await;
    results
        .iter()
        .filter(|r| match r {
            Ok(_) => false,
            Err(kfop_runtime::kube::Error::Api(status)) if status.code == 429 => true,
            Err(e) => panic!("unexpected error: {e}"),
        })
        .count()
}

/// The user's own priority level (1 share of the server's seats, nothing borrowed, excess
/// rejected) and the FlowSchema sending it there, ahead of the built-in ones.
async fn throttle(admin: &Client, name: &str) {
    let levels: Api<PriorityLevelConfiguration> = Api::all(admin.clone());
    let level = json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": name},
        "spec": {"type": "Limited", "limited": {
            "nominalConcurrencyShares": 1, "lendablePercent": 0, "borrowingLimitPercent": 0,
            "limitResponse": {"type": "Reject"}}}
    });
    levels
        .create(&PostParams::default(), &serde_json::from_value(level).unwrap())
        .await
        .unwrap();
    let schemas: Api<FlowSchema> = Api::all(admin.clone());
    let schema = json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": {"name": name},
        "spec": {
            "priorityLevelConfiguration": {"name": name},
            "matchingPrecedence": 50,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{
                "subjects": [{"kind": "User", "user": {"name": USER}}],
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                   "namespaces": ["*"], "clusterScope": true}]
            }]
        }
    });
    schemas
        .create(&PostParams::default(), &serde_json::from_value(schema).unwrap())
        .await
        .unwrap();
}

/// Lets [`USER`] read, and waits until the authorizer knows it.
async fn authorize(admin: &Client, name: &str, api: &Api<ConfigMap>) {
    let bindings: Api<ClusterRoleBinding> = Api::all(admin.clone());
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}]
    });
    bindings
        .create(&PostParams::default(), &serde_json::from_value(binding).unwrap())
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while let Err(e) = api.list(&ListParams::default()).await {
        assert!(Instant::now() < deadline, "{USER} is still not authorized: {e}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn overload_429s_are_retried_after_their_retry_after() {
    let plane = ControlPlane::start(PlaneOptions {
        priority_and_fairness: true,
        ..PlaneOptions::default()
    })
    .await
    .unwrap();
    let admin = plane.client().await.unwrap();
    let name = "kfop-test-throttled";
    let ns = "default";
    let mut plain_config = throttled_config(&plane).await;
    plain_config.default_retry = false;
    let plain: Api<ConfigMap> = Api::namespaced(Client::try_from(plain_config).unwrap(), ns);
    authorize(&admin, name, &plain).await;
    throttle(&admin, name).await;

    // A plain client without retries shows the server rejecting: APF applies its new
    // configuration within a moment, so wait for the first 429.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut rejected = 0;
    while rejected == 0 {
        assert!(Instant::now() < deadline, "the API server never answered 429");
        rejected = too_many(&plain).await;
    }

    // kfop's client, as the operator builds it by default.
    let kfop = client::build(throttled_config(&plane).await, RateLimit::default()).unwrap();
    let kfop: Api<ConfigMap> = Api::namespaced(kfop, ns);
    let started = Instant::now();
    let failed = too_many(&kfop).await;
    let took = started.elapsed();
    println!(
        "{REQUESTS} lists at once: a plain client had {rejected} rejected with 429; kfop's client {failed} failed, all done in {took:?}"
    );
    assert_eq!(failed, 0, "kfop's client gave up on a 429");
    drop(plane);
}
