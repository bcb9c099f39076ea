#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Issue #11's regression: with every kind enabled, jobs of other kinds are created, run and
//! deleted (their pods deleted by the garbage collector) while a PyTorchJob runs; its pods then
//! finish and the job must reach Succeeded from the pod events alone. The resync period is an hour,
//! so the safety net cannot hide a lost trigger.
use std::time::Duration;

use kfop_operator::samples;
use kfop_operator::schemes::{self, Scheme};
use kfop_runtime::k8s_openapi::api::core::v1::Pod;
use kfop_runtime::kube::ResourceExt;
use kfop_runtime::kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kfop_runtime::testing::Operator;
use kfop_testenv::{TestEnv, TestNamespace, pods, wait};

mod common;
use common::{pod_count, running_pods, until_succeeded};

/// A namespace on the shared plane with every bundled CRD installed.
async fn namespace(prefix: &str) -> TestNamespace {
    let env = TestEnv::shared().unwrap();
    let all = schemes::parse(&[]).unwrap();
    env.install_crds(all.iter().map(|s| s.crd_without_conversion()))
        .await
        .unwrap();
    env.namespace(prefix).await.unwrap()
}

/// The all-in-one operator, every kind, watching `ns`; the resync period is an hour, so the
/// safety net cannot hide a lost trigger.
fn operator(ns: &TestNamespace) -> Operator {
    let all = schemes::parse(&[]).unwrap();
    Operator::start_with(
        ns.client(),
        ns.name(),
        |c| c.resync_period = Duration::from_secs(3600),
        move |m| kfop_operator::register(m, &all, &Default::default()).unwrap(),
    )
}

async fn create(ns: &TestNamespace, scheme: Scheme, name: &str) -> Api<DynamicObject> {
    let (_, mut job) = samples::sample(scheme).unwrap();
    job.metadata.name = Some(name.to_owned());
    job.metadata.namespace = Some(ns.name().to_owned());
    let api = Api::namespaced_with(ns.client(), ns.name(), &samples::api_resource(scheme));
    api.create(&PostParams::default(), &job).await.unwrap();
    api
}

async fn pods_gone(ns: &TestNamespace, job: &str) {
    let selector = format!("training.kubeflow.org/job-name={job}");
    let api: Api<Pod> = ns.api();
    wait::until(&format!("pods of {job} gone"), wait::default_timeout(), || {
        let api = api.clone();
        let selector = selector.clone();
        async move {
            let list = api.list(&ListParams::default().labels(&selector)).await.ok();
            Ok(list.filter(|l| l.items.is_empty()).map(|_| ()))
        }
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_job_finishes_after_other_kinds_pods_were_deleted() {
    let ns = namespace("stranded").await;
    let _operator = operator(&ns);

    let others = [
        Scheme::TfJob,
        Scheme::XgBoostJob,
        Scheme::PaddleJob,
        Scheme::JaxJob,
        Scheme::MxJob,
    ];
    for round in 0..3 {
        let name = format!("pt-{round}");
        let pytorch = create(&ns, Scheme::PyTorchJob, &name).await;
        let pt_pods = running_pods(&ns, &name, 2).await;

        // Other kinds come and go: their pods are deleted while the PyTorchJob runs.
        for (i, scheme) in others.iter().enumerate() {
            let other = format!("other-{round}-{i}");
            let api = create(&ns, *scheme, &other).await;
            running_pods(&ns, &other, pod_count(*scheme)).await;
            // All its pods deleted in one request (as a namespace deletion does): a burst of
            // changes and deletions on the shared pod watch.
            let pod_api: Api<Pod> = ns.api();
            let selector = format!("training.kubeflow.org/job-name={other}");
            pod_api
                .delete_collection(&DeleteParams::default(), &ListParams::default().labels(&selector))
                .await
                .unwrap();
            api.delete(&other, &DeleteParams::background()).await.unwrap();
            pods_gone(&ns, &other).await;
        }

        let pod_api: Api<Pod> = ns.api();
        for pod in &pt_pods {
            pods::finish(&pod_api, &pod.name_any(), 0, 0).await.unwrap();
        }
        until_succeeded(&pytorch, &name, "from its pods' events").await;
    }
}

/// An operator restart lists every cache afresh: an MPIJob whose launcher Job completed while no
/// operator ran must succeed from what the new operator lists (list items carry no type, and an
/// untyped launcher Job once looked missing, so the job stayed Running).
#[tokio::test]
async fn a_job_that_finished_while_the_operator_was_down_succeeds_after_its_restart() {
    let ns = namespace("restarted").await;
    let first = operator(&ns);
    let mpi = create(&ns, Scheme::MpiJob, "mpi-restart").await;
    let pods = running_pods(&ns, "mpi-restart", pod_count(Scheme::MpiJob)).await;
    first.stop().await;

    let pod_api: Api<Pod> = ns.api();
    for pod in &pods {
        pods::finish(&pod_api, &pod.name_any(), 0, 0).await.unwrap();
    }
    let launchers: Api<kfop_runtime::k8s_openapi::api::batch::v1::Job> = ns.api();
    wait::until("the launcher Job complete", wait::default_timeout(), || {
        let launchers = launchers.clone();
        async move {
            let job = launchers.get_opt("mpi-restart-launcher").await.ok().flatten();
            let complete = job
                .and_then(|j| j.status)
                .and_then(|s| s.conditions)
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Complete" && c.status == "True"));
            Ok(complete.then_some(()))
        }
    })
    .await
    .unwrap();

    let _operator = operator(&ns);
    until_succeeded(&mpi, "mpi-restart", "after the restart").await;
}
