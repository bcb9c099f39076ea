#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The bundled PodGroup CRDs install on a real control plane and accept a PodGroup each, with
//! the spec and status fields the gang schedulers use.
use kfop_testenv::{TestEnv, crds};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::json;

fn pod_group(group: &str, version: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, "PodGroup"), "podgroups")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_pod_group_kinds_install_and_accept_pod_groups() {
    let env = TestEnv::shared().unwrap();
    env.install_crds(crds::pod_groups().unwrap()).await.unwrap();
    let ns = env.namespace("podgroups").await.unwrap();

    let cases = [
        (
            pod_group("scheduling.volcano.sh", "v1beta1"),
            json!({"minMember": 2, "queue": "default", "priorityClassName": "high",
                   "minResources": {"cpu": "1500m", "memory": "2Gi", "nvidia.com/gpu": 2}}),
        ),
        (
            pod_group("scheduling.x-k8s.io", "v1alpha1"),
            json!({"minMember": 2, "minResources": {"cpu": "3"}, "scheduleTimeoutSeconds": 60}),
        ),
    ];
    for (ar, spec) in cases {
        let api: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &ar);
        let created = api
            .create(
                &PostParams::default(),
                &DynamicObject::new("job", &ar).data(json!({ "spec": spec })),
            )
            .await
            .unwrap();
        assert_eq!(created.data["spec"], spec, "{}", ar.api_version);

        // The status subresource is separate from the spec, as schedulers write it.
        let status = json!({"status": {"phase": "Inqueue"}});
        let patched = api
            .patch_status("job", &PatchParams::default(), &Patch::Merge(&status))
            .await
            .unwrap();
        assert_eq!(patched.data["status"]["phase"], "Inqueue", "{}", ar.api_version);
        assert_eq!(patched.data["spec"], spec);

        // A non-integer minMember is rejected by the schema.
        let bad = DynamicObject::new("bad", &ar).data(json!({"spec": {"minMember": "two"}}));
        assert!(
            api.create(&PostParams::default(), &bad).await.is_err(),
            "{}",
            ar.api_version
        );
    }
    ns.delete().await.unwrap();
}
