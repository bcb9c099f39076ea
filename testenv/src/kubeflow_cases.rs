//! Kubeflow's integration cases (reference §3.2) need the same fixture for every job kind:
//! a namespace with the kind's CRD and operator, jobs built from JSON as Kubeflow's tests write
//! them, waits for pods, services and conditions, Kubeflow's labels and owner references, and
//! the suspend/resume case. [`kubeflow_cases!`] writes it into an operator's test file for one
//! kind (a macro, so the fixture names that kind's own types without this crate depending on
//! the operator or on kfop-runtime).

/// Expands the fixture for one job kind into the calling test file (`framework` is the loaded
/// framework to run): `Job`, `KIND`,
/// `CONTROLLER`, `SPECS`, `CONTAINER`, `PORT_NAME`, `JOB` (`test-job`), `fixture(prefix)`,
/// `replica`, `new_job`, the `Fixture` waits, `conditions`, `cond`, `env`, `strings`, `owner`,
/// `labels`, `check_resources` and `suspend_then_resume`. The caller depends on kfop-runtime
/// (feature `testing`), kfop-testenv, serde_json and tokio.
#[macro_export]
macro_rules! kubeflow_cases {
    (
        job = $job:ty,
        framework = $framework:expr,
        kind = $kind:literal,
        controller = $controller:literal,
        specs = $specs:literal,
        container = $container:literal,
        port_name = $port_name:literal
        $(, spec = $spec:expr)? $(,)?
    ) => {
        use std::collections::BTreeMap;
        use std::time::Duration;
        use ::kfop_runtime::api::{ConditionStatus as S, JobConditionType as C, JobStatus};
        use ::kfop_runtime::k8s_openapi::api::core::v1::{Event, Pod, Service};
        use ::kfop_runtime::k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        use ::kfop_runtime::kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
        use ::kfop_runtime::kube::{CustomResourceExt, ResourceExt};
        use ::kfop_runtime::testing::Operator;
        use $crate::{TestEnv, TestNamespace, pods, wait};
        use ::serde_json::{Value, json};

        type Job = $job;
        const KIND: &str = $kind;
        const CONTROLLER: &str = $controller;
        const SPECS: &str = $specs;
        const CONTAINER: &str = $container;
        const PORT_NAME: &str = $port_name;
        const JOB: &str = "test-job";

        struct Fixture {
            ns: TestNamespace,
            jobs: Api<Job>,
            pods: Api<Pod>,
            services: Api<Service>,
            _operator: Operator,
        }

        async fn fixture(prefix: &str) -> Fixture {
            let env = TestEnv::shared().unwrap();
            env.install_crds([Job::crd()]).await.unwrap();
            let ns = env.namespace(prefix).await.unwrap();
            let operator = Operator::start(ns.client(), ns.name(), |m| m.register($framework));
            Fixture {
                jobs: ns.api(),
                pods: ns.api(),
                services: ns.api(),
                ns,
                _operator: operator,
            }
        }

        /// A replica of `n` pods running the framework's container (`extra` merged into the replica).
        fn replica(n: i32, extra: Value) -> Value {
            let mut r = json!({ "replicas": n, "template": { "spec": { "containers": [
                { "name": CONTAINER, "image": "test-image" }
            ] } } });
            r.as_object_mut()
                .unwrap()
                .extend(extra.as_object().cloned().unwrap_or_default());
            r
        }

        /// The job `test-job` with these replica specs; `extra` is merged into its spec.
        fn new_job(roles: &[(&str, Value)], extra: Value) -> Job {
            let specs: serde_json::Map<String, Value> =
                roles.iter().map(|(r, v)| ((*r).to_owned(), v.clone())).collect();
            let mut spec = json!({ SPECS: specs });
            // The kind's required spec fields (`spec = ...`: MXJob's jobMode), then the case's.
            let required: Value = json!({});
            $(let required: Value = $spec;)?
            for fields in [required, extra] {
                spec.as_object_mut()
                    .unwrap()
                    .extend(fields.as_object().cloned().unwrap_or_default());
            }
            let job =
                json!({ "apiVersion": "kubeflow.org/v1", "kind": KIND, "metadata": { "name": JOB }, "spec": spec });
            serde_json::from_value(job).unwrap()
        }

        impl Fixture {
            async fn create(&self, job: Job) -> Job {
                self.jobs.create(&PostParams::default(), &job).await.unwrap()
            }

            async fn wait_status(&self, what: &str, ok: impl Fn(&JobStatus) -> bool) -> JobStatus {
                let got = wait::until(what, wait::default_timeout(), || async {
                    let s = self.jobs.get(JOB).await.unwrap().status.unwrap_or_default();
                    Ok(ok(&s).then_some(s))
                })
                .await;
                match got {
                    Ok(status) => status,
                    Err(e) => panic!("{e}: {:#?}", self.jobs.get(JOB).await.unwrap().status),
                }
            }

            async fn condition(&self, type_: C) -> JobStatus {
                self.wait_status(&format!("{type_:?}"), |s| s.is(type_)).await
            }

            /// Waits until exactly the pods `names` exist, all in `phase`.
            async fn wait_pods(&self, names: &[&str], phase: &str) -> BTreeMap<String, Pod> {
                wait::until(
                    &format!("pods {names:?} {phase}"),
                    wait::default_timeout(),
                    || async {
                        let list = self.pods.list(&ListParams::default()).await.unwrap().items;
                        let ok = list.len() == names.len()
                            && list
                                .iter()
                                .all(|p| names.contains(&p.name_any().as_str()) && pods::phase(p) == phase);
                        Ok(ok.then(|| list.into_iter().map(|p| (p.name_any(), p)).collect()))
                    },
                )
                .await
                .unwrap()
            }

            /// Waits until exactly the services `names` exist.
            async fn wait_services(&self, names: &[&str]) -> BTreeMap<String, Service> {
                wait::until(
                    &format!("services {names:?}"),
                    wait::default_timeout(),
                    || async {
                        let list = self.services.list(&ListParams::default()).await.unwrap().items;
                        let ok =
                            list.len() == names.len() && list.iter().all(|s| names.contains(&s.name_any().as_str()));
                        Ok(ok.then(|| list.into_iter().map(|s| (s.name_any(), s)).collect()))
                    },
                )
                .await
                .unwrap()
            }

            async fn patch_spec(&self, patch: Value) {
                let patch = Patch::Merge(json!({ "spec": patch }));
                self.jobs
                    .patch(JOB, &PatchParams::default(), &patch)
                    .await
                    .unwrap();
            }

            async fn event(&self, reason: &str) -> Event {
                let events: Api<Event> = self.ns.api();
                wait::until(&format!("event {reason}"), wait::default_timeout(), || async {
                    let list = events.list(&ListParams::default()).await.unwrap().items;
                    Ok(list.into_iter().find(|e| e.reason.as_deref() == Some(reason)))
                })
                .await
                .unwrap()
            }

            /// Makes pod `name` exit with `code` and waits for a new pod under that name, which a
            /// node selector no node matches keeps Pending (so the job's Restarting stays observable).
            async fn fail_and_replace(&self, role: &str, name: &str, code: i32) -> Pod {
                let old = self.pods.get(name).await.unwrap().uid();
                let hold = json!({ "kfop.dev/pool": format!("none-{}", self.ns.name()) });
                let template = json!({ "template": { "spec": { "nodeSelector": hold } } });
                self.patch_spec(json!({ SPECS: { role: template } })).await;
                pods::finish(&self.pods, name, code, 0).await.unwrap();
                wait::until(&format!("{name} replaced"), wait::default_timeout(), || async {
                    let pod = self.pods.get_opt(name).await.unwrap();
                    Ok(pod.filter(|p| p.uid() != old))
                })
                .await
                .unwrap()
            }
        }

        type Cond = (C, S, String, String);

        fn conditions(status: &JobStatus) -> Vec<Cond> {
            let c = status.conditions.iter();
            c.map(|c| (c.type_, c.status, c.reason.clone(), c.message.clone()))
                .collect()
        }

        /// A condition with reason `<Kind><reason>`.
        fn cond(type_: C, status: S, reason: &str, message: &str) -> Cond {
            (type_, status, format!("{KIND}{reason}"), message.to_owned())
        }

        /// The first container's environment; a fieldRef reads as `<fieldPath>`.
        fn env(pod: &Pod) -> BTreeMap<String, String> {
            let mut map = BTreeMap::new();
            for e in pod.spec.as_ref().unwrap().containers[0].env.iter().flatten() {
                let field = || {
                    format!(
                        "<{}>",
                        e.value_from
                            .as_ref()
                            .unwrap()
                            .field_ref
                            .as_ref()
                            .unwrap()
                            .field_path
                    )
                };
                let value = e.value.clone().unwrap_or_else(field);
                assert!(
                    map.insert(e.name.clone(), value).is_none(),
                    "{} set twice",
                    e.name
                );
            }
            map
        }

        fn strings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        }

        fn owner(job: &Job) -> Option<Vec<OwnerReference>> {
            Some(vec![OwnerReference {
                api_version: "kubeflow.org/v1".into(),
                kind: KIND.into(),
                name: JOB.into(),
                uid: job.uid().unwrap(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }])
        }

        /// Kubeflow's labels of replica `index` of `role` (lower-case); `job-role` only on the master pod.
        fn labels(role: &str, index: i32, master: bool) -> BTreeMap<String, String> {
            let index = index.to_string();
            let mut l = strings(&[
                ("training.kubeflow.org/operator-name", CONTROLLER),
                ("training.kubeflow.org/job-name", JOB),
                ("training.kubeflow.org/replica-type", role),
                ("training.kubeflow.org/replica-index", index.as_str()),
            ]);
            if master {
                l.insert("training.kubeflow.org/job-role".into(), "master".into());
            }
            l
        }

        /// Pods and services `<job>-<role>-<i>` with Kubeflow's labels, ownerRefs and service port;
        /// `master` names the pod labelled `job-role=master`.
        async fn check_resources(
            f: &Fixture,
            job: &Job,
            names: &[&str],
            master: &str,
            port: i32,
        ) -> BTreeMap<String, Pod> {
            let pods = f.wait_pods(names, "Running").await;
            let services = f.wait_services(names).await;
            for name in names {
                let (role, index) = name.strip_prefix("test-job-").unwrap().rsplit_once('-').unwrap();
                let index: i32 = index.parse().unwrap();
                let pod = &pods[*name];
                assert_eq!(pod.labels(), &labels(role, index, *name == master), "{name}");
                assert_eq!(pod.metadata.owner_references, owner(job), "{name}");
                let svc = &services[*name];
                assert_eq!(svc.labels(), &labels(role, index, false), "service {name}");
                assert_eq!(svc.metadata.owner_references, owner(job), "service {name}");
                let spec = svc.spec.clone().unwrap();
                assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
                assert_eq!(
                    spec.selector.unwrap(),
                    labels(role, index, false),
                    "service {name}"
                );
                let svc_port = &spec.ports.unwrap()[0];
                assert_eq!(
                    (svc_port.name.as_deref(), svc_port.port),
                    (Some(PORT_NAME), port),
                    "{name}"
                );
            }
            pods
        }

        /// §3.2 case 4: Running, then suspended (pods and services deleted, startTime kept), then
        /// resumed (new pods, startTime reset). `running` is Kubeflow's Running message, when the
        /// reference documents it.
        async fn suspend_then_resume(f: &Fixture, names: &[&str], running: Option<&str>) {
            let before = f.wait_pods(names, "Running").await;
            let created = cond(
                C::Created,
                S::True,
                "Created",
                &format!("{KIND} {JOB} is created."),
            );
            let status = f.condition(C::Running).await;
            let message = status.condition(C::Running).unwrap().message.clone();
            let running = cond(C::Running, S::True, "Running", running.unwrap_or(&message));
            assert_eq!(conditions(&status), [created.clone(), running.clone()]);
            let started = status.start_time.clone().unwrap();

            f.patch_spec(json!({ "runPolicy": { "suspend": true } })).await;
            let suspended = format!("{KIND} {JOB} is suspended.");
            let status = f.condition(C::Suspended).await;
            f.wait_pods(&[], "").await;
            f.wait_services(&[]).await;
            assert_eq!(
                conditions(&status),
                [
                    created.clone(),
                    cond(C::Running, S::False, "Suspended", &suspended),
                    cond(C::Suspended, S::True, "Suspended", &suspended),
                ]
            );
            assert!(
                status.replica_statuses.values().all(|r| r.active == 0),
                "{status:?}"
            );
            assert_eq!(
                status.start_time.as_ref(),
                Some(&started),
                "startTime kept on suspend"
            );
            // startTime has second precision: let a second pass so that a reset shows.
            tokio::time::sleep(Duration::from_millis(1100)).await;
            assert!(
                f.pods
                    .list(&ListParams::default())
                    .await
                    .unwrap()
                    .items
                    .is_empty()
            );

            f.patch_spec(json!({ "runPolicy": { "suspend": false } })).await;
            let after = f.wait_pods(names, "Running").await;
            f.wait_services(names).await;
            for name in names {
                assert_ne!(after[*name].uid(), before[*name].uid(), "{name} recreated");
            }
            let status = f.condition(C::Running).await;
            let resumed = format!("{KIND} {JOB} is resumed.");
            assert_eq!(
                conditions(&status),
                [
                    created,
                    cond(C::Suspended, S::False, "Resumed", &resumed),
                    running
                ]
            );
            assert_ne!(
                status.start_time.as_ref(),
                Some(&started),
                "startTime reset on resume"
            );
        }
    };
}
