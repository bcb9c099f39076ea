#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The Helm chart (`charts/kfop`) and the kustomize overlays (`deploy/kustomize/overlays/*`) as a
//! platform team installs them: rendered by Helm v3.19.0 and kustomize (built from their Go
//! modules by `testenv/tools/build.sh`), checked object by object, applied to the local plane,
//! then the operator runs out of cluster with the installed Deployment's args and env,
//! impersonating the installed ServiceAccount (two replicas, one leading), through one job of
//! each kind to Succeeded with no forbidden (403) response in its `kfop_client_requests_total`.
//!
//! The chart's replicas run from the operator's image, not from `target/`: `scripts/image.sh
//! --debug` packs the binary this test was built with, crane unpacks the archive into a fresh
//! root, and each replica is that root's dynamic loader running that root's binary with that
//! root's libraries. The image's config and layers are read back through crane's registry on a
//! loopback port, and the chart rendered for the pushed reference runs exactly that image.
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kfop_operator::deploy::{self, flags};
use kfop_operator::samples;
use kfop_operator::schemes::Scheme;
use kfop_runtime::api::{JobConditionType, JobStatus};
use kfop_runtime::k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kfop_runtime::k8s_openapi::api::core::v1::{Namespace, Node};
use kfop_runtime::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kfop_runtime::kube::api::{
    Api, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams, TypeMeta,
};
use kfop_runtime::kube::config::{KubeConfigOptions, Kubeconfig};
use kfop_runtime::kube::discovery::{self, Scope};
use kfop_runtime::kube::{Client, Config};
use kfop_runtime::serde_json::{self, Value, json};
use kfop_testenv::{TestEnv, pods, wait};

const MANAGER: &str = "kfop-install-test";
/// The namespace the chart is installed into (`helm install -n`).
const HELM_NAMESPACE: &str = "kfop-helm";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `testenv/tools/build.sh <tool>`: the cached binary, built on first use (Helm: about 1.5 minutes
/// on 2 cores; kustomize: half a minute).
fn tool(name: &str) -> PathBuf {
    let script = repo_root().join("testenv/tools/build.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(name)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} {name} failed: {}",
        script.display(),
        out.status
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    PathBuf::from(stdout.lines().last().unwrap().trim())
}

/// Runs `bin args` and returns its stdout; fails with its stderr.
fn run(bin: &Path, args: &[&str]) -> String {
    let out = Command::new(bin).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{} {args:?}: {}\n{}",
        bin.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn parse(yaml: &str) -> Vec<Value> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).unwrap();
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

fn helm_template(extra: &[&str]) -> Vec<Value> {
    let helm = tool("helm");
    let chart = repo_root().join("charts/kfop");
    let chart = chart.to_str().unwrap();
    let mut args = vec!["template", "kfop", chart, "-n", HELM_NAMESPACE, "--include-crds"];
    args.extend_from_slice(extra);
    parse(&run(&helm, &args))
}

fn kustomize_build(dir: &Path) -> Vec<Value> {
    let kustomize = tool("kustomize");
    parse(&run(&kustomize, &["build", dir.to_str().unwrap()]))
}

fn overlay(name: &str) -> PathBuf {
    repo_root().join("deploy/kustomize/overlays").join(name)
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

fn one<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let found = of_kind(docs, kind);
    assert_eq!(found.len(), 1, "one {kind} expected, found {}", found.len());
    found[0]
}

/// The metrics Service (the other Service fronts the conversion webhook).
fn metrics_service(docs: &[Value]) -> &Value {
    let found: Vec<&Value> = of_kind(docs, "Service")
        .into_iter()
        .filter(|s| s["spec"]["ports"][0]["name"] == "metrics")
        .collect();
    assert_eq!(found.len(), 1, "one metrics Service expected");
    found[0]
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

/// `value` with every number as a float: kustomize writes `minimum: 1.0` back as `1`.
fn numbers_as_f64(value: &Value) -> Value {
    match value {
        Value::Number(n) => json!(n.as_f64()),
        Value::Array(items) => Value::Array(items.iter().map(numbers_as_f64).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), numbers_as_f64(v))).collect())
        }
        other => other.clone(),
    }
}

/// What the test needs of an install, read from its rendered objects.
#[derive(Debug)]
struct Install {
    what: String,
    namespace: String,
    service_account: String,
    args: Vec<String>,
    docs: Vec<Value>,
}

/// Checks everything issue #18 asks of an install's objects, in `namespace`.
fn check(what: &str, docs: Vec<Value>, namespace: &str) -> Install {
    let all: Vec<Scheme> = Scheme::ALL.iter().map(|(_, s)| *s).collect();

    // The CRDs of all seven kinds and the Framework CRD, exactly the types' own.
    let crds = of_kind(&docs, "CustomResourceDefinition");
    let types = kfop_operator::crds::all(&all.iter().copied().collect());
    assert_eq!(crds.len(), types.len(), "{what}: CRDs");
    for crd in &types {
        let expected = serde_json::to_value(crd).unwrap();
        let name = expected["metadata"]["name"].as_str().unwrap();
        let found = crds.iter().find(|c| c["metadata"]["name"] == name);
        let found = found.unwrap_or_else(|| panic!("{what}: no CRD {name}"));
        let mut expected = expected.clone();
        // kustomize moves the conversion webhook's Service into the install's namespace; Helm
        // leaves `crds/` untemplated (the operator repoints it at itself when it starts).
        let service = "/spec/conversion/webhook/clientConfig/service/namespace";
        if let (Some(theirs), Some(ours)) = (found.pointer(service), expected.pointer_mut(service)) {
            assert!(
                theirs == namespace || theirs == deploy::NAMESPACE,
                "{what}: CRD {name} sends conversions to namespace {theirs}"
            );
            *ours = theirs.clone();
        }
        assert_eq!(
            numbers_as_f64(&found["spec"]),
            numbers_as_f64(&expected["spec"]),
            "{what}: CRD {name} differs from its type's"
        );
    }

    // Least privilege: the ClusterRole has exactly the rules `deploy` prints.
    let reference = parse(&deploy::rbac(&all.iter().copied().collect()));
    let rules = &one(&docs, "ClusterRole")["rules"];
    assert_eq!(
        rules,
        &one(&reference, "ClusterRole")["rules"],
        "{what}: ClusterRole rules"
    );
    let role_name = one(&docs, "ClusterRole")["metadata"]["name"].clone();

    let sa = one(&docs, "ServiceAccount");
    assert_eq!(
        sa["metadata"]["namespace"], namespace,
        "{what}: ServiceAccount namespace"
    );
    let sa_name = sa["metadata"]["name"].as_str().unwrap().to_owned();
    let binding = one(&docs, "ClusterRoleBinding");
    assert_eq!(binding["roleRef"]["name"], role_name, "{what}: binding's role");
    assert_eq!(
        binding["subjects"],
        json!([{ "kind": "ServiceAccount", "name": sa_name, "namespace": namespace }]),
        "{what}: binding's subject"
    );

    // A non-root Deployment with a read-only root filesystem, two leader-electing replicas,
    // probes on the metrics port, resource requests, the defaults' flags.
    let deployment = one(&docs, "Deployment");
    assert_eq!(deployment["metadata"]["namespace"], namespace, "{what}");
    assert_eq!(deployment["spec"]["replicas"], 2, "{what}: replicas");
    let pod = &deployment["spec"]["template"];
    let selector = &deployment["spec"]["selector"]["matchLabels"];
    for (key, value) in selector.as_object().unwrap() {
        assert_eq!(
            &pod["metadata"]["labels"][key], value,
            "{what}: pod labels vs selector"
        );
    }
    let spec = &pod["spec"];
    assert_eq!(spec["serviceAccountName"], sa_name.as_str(), "{what}");
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true, "{what}");
    let containers = spec["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1, "{what}");
    let container = &containers[0];
    assert_eq!(
        container["securityContext"]["readOnlyRootFilesystem"], true,
        "{what}"
    );
    assert_eq!(
        container["securityContext"]["allowPrivilegeEscalation"], false,
        "{what}"
    );
    assert_eq!(
        container["securityContext"]["capabilities"]["drop"],
        json!(["ALL"]),
        "{what}"
    );
    for resource in ["cpu", "memory"] {
        assert!(
            container["resources"]["requests"][resource].is_string(),
            "{what}: no {resource} request"
        );
    }
    let args = strings(&container["args"]);
    assert_eq!(args, flags::default_args(), "{what}: the default flags");
    assert!(args.contains(&"--leader-elect".to_owned()), "{what}");
    let bind = args
        .iter()
        .find_map(|a| a.strip_prefix("--metrics-bind-address="))
        .unwrap();
    let port: u16 = bind.parse::<SocketAddr>().unwrap().port();
    let webhook = args
        .iter()
        .find_map(|a| a.strip_prefix("--webhook-bind-address="))
        .unwrap();
    let webhook_port: u16 = webhook.parse::<SocketAddr>().unwrap().port();
    let ports = container["ports"].as_array().unwrap();
    assert_eq!(
        ports,
        &vec![
            json!({ "name": "metrics", "containerPort": port }),
            json!({ "name": "webhook", "containerPort": webhook_port }),
        ],
        "{what}"
    );
    assert_eq!(
        container["livenessProbe"]["httpGet"],
        json!({ "path": "/healthz", "port": "metrics" })
    );
    assert_eq!(
        container["readinessProbe"]["httpGet"],
        json!({ "path": "/readyz", "port": "metrics" }),
        "{what}"
    );
    let env: Vec<&Value> = container["env"].as_array().unwrap().iter().collect();
    for (name, field) in [
        ("MY_POD_NAMESPACE", "metadata.namespace"),
        ("MY_POD_NAME", "metadata.name"),
    ] {
        assert!(
            env.iter()
                .any(|e| e["name"] == name && e["valueFrom"]["fieldRef"]["fieldPath"] == field),
            "{what}: env {name}"
        );
    }

    // A PodDisruptionBudget keeping one of the two, and the metrics Service, on the same pods.
    let pdb = one(&docs, "PodDisruptionBudget");
    assert_eq!(pdb["spec"]["minAvailable"], 1, "{what}");
    assert_eq!(
        &pdb["spec"]["selector"]["matchLabels"], selector,
        "{what}: PDB selector"
    );
    let service = metrics_service(&docs);
    assert_eq!(&service["spec"]["selector"], selector, "{what}: Service selector");
    assert_eq!(
        service["spec"]["ports"],
        json!([{ "name": "metrics", "port": port, "targetPort": "metrics" }]),
        "{what}"
    );
    // The conversion webhook's Service: the one the MPIJob CRD names, on the same pods.
    let mpijobs = of_kind(&docs, "CustomResourceDefinition")
        .into_iter()
        .find(|c| c["metadata"]["name"] == "mpijobs.kubeflow.org")
        .unwrap();
    let reference = &mpijobs["spec"]["conversion"]["webhook"]["clientConfig"]["service"];
    let webhook_service = of_kind(&docs, "Service")
        .into_iter()
        .find(|s| s["metadata"]["name"] == reference["name"])
        .unwrap_or_else(|| {
            panic!(
                "{what}: no Service {} for the conversion webhook",
                reference["name"]
            )
        });
    assert_eq!(
        &webhook_service["spec"]["selector"], selector,
        "{what}: webhook Service selector"
    );
    assert_eq!(
        webhook_service["spec"]["ports"],
        json!([{ "name": "webhook", "port": 443, "targetPort": "webhook" }]),
        "{what}"
    );
    assert!(
        of_kind(&docs, "ServiceMonitor").is_empty(),
        "{what}: ServiceMonitor is opt-in"
    );

    Install {
        what: what.to_owned(),
        namespace: namespace.to_owned(),
        service_account: sa_name,
        args,
        docs,
    }
}

/// Rendering alone (no plane): what the chart and the overlays hold by default, and that values
/// reach the operator's flags as flags it accepts.
#[test]
fn chart_and_overlays_render_what_an_install_needs() {
    let started = Instant::now();
    let chart = repo_root().join("charts/kfop");
    let lint = run(&tool("helm"), &["lint", "--strict", chart.to_str().unwrap()]);
    assert!(lint.contains("0 chart(s) failed"), "{lint}");
    let helm = helm_template(&[]);
    let standalone = kustomize_build(&overlay("standalone"));
    let kubeflow = kustomize_build(&overlay("kubeflow"));
    eprintln!(
        "rendered objects: helm {}, kustomize standalone {}, kustomize kubeflow {}",
        helm.len(),
        standalone.len(),
        kubeflow.len()
    );
    check("helm", helm, HELM_NAMESPACE);
    let standalone = check("standalone", standalone, "kfop-system");
    assert_eq!(
        one(&standalone.docs, "Namespace")["metadata"]["name"],
        "kfop-system"
    );
    let kubeflow = check("kubeflow", kubeflow, "kubeflow");
    // Kubeflow's manifests own the `kubeflow` namespace.
    assert!(of_kind(&kubeflow.docs, "Namespace").is_empty());

    // Every flag set through values reaches the args, and the operator accepts them all.
    let custom = helm_template(&[
        "--set",
        "flags.namespace=team-a,flags.noChildEvents=true,flags.leaderElectionNamespace=locks",
        "--set",
        "flags.kubeApiQps=50,flags.controllerThreads=8,flags.resyncPeriod=90s",
        "--set",
        "flags.gangSchedulerName=volcano,flags.metricsBindAddress=0.0.0.0:9090",
        "--set",
        "enableSchemes={tfjob,mpijob},replicaCount=3",
        "--set",
        "serviceMonitor.enabled=true,serviceMonitor.labels.release=prometheus",
        "--set",
        "podDisruptionBudget.enabled=false,serviceAccount.create=false,serviceAccount.name=platform-sa",
    ]);
    let deployment = one(&custom, "Deployment");
    assert_eq!(deployment["spec"]["replicas"], 3);
    assert_eq!(
        deployment["spec"]["template"]["spec"]["serviceAccountName"],
        "platform-sa"
    );
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let args = strings(&container["args"]);
    for expected in [
        "--namespace=team-a",
        "--no-child-events",
        "--leader-election-namespace=locks",
        "--kube-api-qps=50",
        "--controller-threads=8",
        "--resync-period=90s",
        "--gang-scheduler-name=volcano",
        "--metrics-bind-address=0.0.0.0:9090",
        "--enable-scheme=tfjob",
        "--enable-scheme=mpijob",
    ] {
        assert!(args.contains(&expected.to_owned()), "{expected} not in {args:?}");
    }
    assert_eq!(container["ports"][0]["containerPort"], 9090);
    assert_eq!(metrics_service(&custom)["spec"]["ports"][0]["port"], 9090);
    let monitor = one(&custom, "ServiceMonitor");
    assert_eq!(monitor["metadata"]["labels"]["release"], "prometheus");
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "metrics");
    assert!(of_kind(&custom, "PodDisruptionBudget").is_empty());
    assert!(of_kind(&custom, "ServiceAccount").is_empty());
    // The binary parses every rendered arg (then prints the CRDs instead of running).
    let mut cli: Vec<&str> = args.iter().map(String::as_str).collect();
    cli.push("crds");
    let crds = run(Path::new(env!("CARGO_BIN_EXE_kfop-operator")), &cli);
    assert!(crds.contains("name: tfjobs.kubeflow.org") && !crds.contains("pytorchjobs"));

    // The ServiceMonitor component, added to the base as a kustomize user would (by relative
    // paths: kustomize refuses absolute ones).
    let dir = std::env::temp_dir().join(format!("kfop-install-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kustomize_root = relative(&dir, &repo_root().join("deploy/kustomize"));
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!(
            "namespace: monitoring-test\nresources:\n  - {root}/base\ncomponents:\n  - {root}/components/service-monitor\n",
            root = kustomize_root.display(),
        ),
    )
    .unwrap();
    let with_monitor = kustomize_build(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    let monitor = one(&with_monitor, "ServiceMonitor");
    assert_eq!(monitor["metadata"]["namespace"], "monitoring-test");
    assert_eq!(
        &monitor["spec"]["selector"]["matchLabels"],
        &metrics_service(&with_monitor)["metadata"]["labels"]
    );
    eprintln!("rendered and checked in {:?}", started.elapsed());
}

/// The path of `to` from the folder `from` (both made absolute first).
fn relative(from: &Path, to: &Path) -> PathBuf {
    let from = from.canonicalize().unwrap();
    let to = to.canonicalize().unwrap();
    let common = from
        .components()
        .zip(to.components())
        .take_while(|(a, b)| a == b)
        .count();
    let ups = from.components().count() - common;
    let mut path: PathBuf = std::iter::repeat_n("..", ups).collect();
    path.extend(to.components().skip(common));
    path
}

/// Server-side applies every object of `install` (its namespace first, then the CRDs until
/// Established).
async fn apply(client: &Client, install: &Install) {
    kfop_testenv::ensure_namespace(client, &install.namespace)
        .await
        .unwrap();
    let crds: Vec<CustomResourceDefinition> = of_kind(&install.docs, "CustomResourceDefinition")
        .into_iter()
        .map(|d| serde_json::from_value(d.clone()).unwrap())
        .collect();
    kfop_testenv::install_crds(client, crds).await.unwrap();
    let params = PatchParams::apply(MANAGER).force();
    for doc in &install.docs {
        if doc["kind"] == "CustomResourceDefinition" || doc["kind"] == "Namespace" {
            continue;
        }
        let object: DynamicObject = serde_json::from_value(doc.clone()).unwrap();
        let types = object.types.clone().unwrap();
        let gvk = GroupVersionKind::try_from(&types).unwrap();
        let (resource, caps) = discovery::pinned_kind(client, &gvk).await.unwrap();
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => Api::namespaced_with(
                client.clone(),
                object.metadata.namespace.as_deref().unwrap_or(&install.namespace),
                &resource,
            ),
            Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        let name = object.metadata.name.clone().unwrap();
        api.patch(&name, &params, &Patch::Apply(&object))
            .await
            .unwrap_or_else(|e| panic!("{}: applying {} {name}: {e}", install.what, types.kind));
    }
}

/// A kubeconfig acting as the install's ServiceAccount (the admin's credentials may impersonate).
fn impersonating(admin: &Path, install: &Install, dir: &Path) -> PathBuf {
    let user = format!(
        "system:serviceaccount:{}:{}",
        install.namespace, install.service_account
    );
    let groups = vec![
        "system:serviceaccounts".to_owned(),
        format!("system:serviceaccounts:{}", install.namespace),
        "system:authenticated".to_owned(),
    ];
    let mut kubeconfig = Kubeconfig::read_from(admin).unwrap();
    for named in &mut kubeconfig.auth_infos {
        if let Some(auth) = &mut named.auth_info {
            auth.impersonate = Some(user.clone());
            auth.impersonate_groups = Some(groups.clone());
        }
    }
    let path = dir.join(format!("{}.kubeconfig", install.what));
    std::fs::write(&path, serde_json::to_string(&kubeconfig).unwrap()).unwrap();
    path
}

async fn client_from(kubeconfig: &Path) -> Client {
    let file = Kubeconfig::read_from(kubeconfig).unwrap();
    let config = Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

/// One operator replica: the binary with the Deployment's args and env, as the kubelet would
/// start it, metrics on a free loopback port. Killed when dropped.
struct Replica {
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
}

impl Replica {
    fn start(operator: &Operator, install: &Install, kubeconfig: &Path, pod: &str, dir: &Path) -> Self {
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let webhook = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        // Out of cluster the API server reaches the webhook at a loopback URL, not the Service.
        let mut args: Vec<String> = install
            .args
            .iter()
            .map(|a| {
                if a.starts_with("--metrics-bind-address=") {
                    format!("--metrics-bind-address={addr}")
                } else if a.starts_with("--webhook-bind-address=") {
                    format!("--webhook-bind-address={webhook}")
                } else {
                    a.clone()
                }
            })
            .collect();
        args.push(format!("--webhook-url=https://{webhook}"));
        let log = dir.join(format!("{pod}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let child = operator
            .command()
            .args(&args)
            .env("KUBECONFIG", kubeconfig)
            .env("MY_POD_NAMESPACE", &install.namespace)
            .env("MY_POD_NAME", pod)
            .env_remove("KUBEFLOW_NAMESPACE")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap();
        Self { child, addr, log }
    }

    fn get(&self, path: &str) -> Option<(u16, String)> {
        let mut stream = TcpStream::connect_timeout(&self.addr, Duration::from_secs(2)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        write!(stream, "GET {path} HTTP/1.0\r\nHost: {}\r\n\r\n", self.addr).ok()?;
        let mut text = String::new();
        stream.read_to_string(&mut text).ok()?;
        let (head, body) = text.split_once("\r\n\r\n")?;
        let code = head.split_whitespace().nth(1)?.parse().ok()?;
        Some((code, body.to_owned()))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The sum of `kfop_client_requests_total` over the series whose labels pass `keep`.
fn requests(metrics: &str, keep: impl Fn(&BTreeMap<&str, &str>) -> bool) -> f64 {
    metrics
        .lines()
        .filter_map(|line| line.strip_prefix("kfop_client_requests_total{"))
        .filter_map(|rest| {
            let (labels, value) = rest.split_once("} ")?;
            let labels: BTreeMap<&str, &str> = labels
                .split(',')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k, v.trim_matches('"')))
                .collect();
            keep(&labels).then(|| value.split_whitespace().next()?.parse::<f64>().ok())?
        })
        .sum()
}

fn status(job: &DynamicObject) -> JobStatus {
    job.data
        .get("status")
        .cloned()
        .and_then(|s| serde_json::from_value(s).ok())
        .unwrap_or_default()
}

/// What one install's run measured.
#[derive(Debug)]
struct Measured {
    requests: f64,
    forbidden: f64,
    elapsed: Duration,
}

/// Applies `install`, runs its two replicas as its ServiceAccount and one job of each kind to
/// Succeeded; returns the replicas' request counts.
async fn install_and_run(env: &TestEnv, install: &Install, operator: &Operator, dir: &Path) -> Measured {
    let started = Instant::now();
    let admin = env.client().await.unwrap();
    apply(&admin, install).await;

    let kubeconfig = impersonating(env.kubeconfig(), install, dir);
    let client = client_from(&kubeconfig).await;
    let review = Api::<SelfSubjectReview>::all(client.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    let user = review.status.and_then(|s| s.user_info).and_then(|u| u.username);
    let expected = format!(
        "system:serviceaccount:{}:{}",
        install.namespace, install.service_account
    );
    assert_eq!(user.as_deref(), Some(expected.as_str()), "{}", install.what);
    // The identity is really bound by RBAC, not the admin's: nodes are not in its role.
    let nodes = Api::<Node>::all(client).list(&Default::default()).await;
    assert!(
        matches!(&nodes, Err(kfop_runtime::kube::Error::Api(e)) if e.code == 403),
        "{}: the ServiceAccount may list nodes: {nodes:?}",
        install.what
    );

    let replicas: Vec<Replica> = (0..2)
        .map(|i| {
            Replica::start(
                operator,
                install,
                &kubeconfig,
                &format!("kfop-operator-{}-{i}", install.what),
                dir,
            )
        })
        .collect();
    // One leads and becomes ready (watches synced); the other waits for the Lease, ready too
    // (the readiness probe must pass on both, or a rollout never completes).
    wait::until(
        &format!("{}: both replicas ready", install.what),
        Duration::from_secs(60),
        || {
            let ready = replicas
                .iter()
                .all(|r| r.get("/readyz").is_some_and(|(code, _)| code == 200));
            async move { Ok(ready.then_some(())) }
        },
    )
    .await
    .unwrap_or_else(|e| {
        let logs: Vec<String> = replicas.iter().map(Replica::log).collect();
        panic!("{e}; logs: {logs:#?}")
    });
    for replica in &replicas {
        assert_eq!(
            replica.get("/healthz").map(|(c, _)| c),
            Some(200),
            "{}",
            install.what
        );
    }

    let ns = env.namespace(&format!("install-{}", install.what)).await.unwrap();
    let (key, value) = pods::complete_after(Duration::from_millis(1500));
    let mut jobs = Vec::new();
    for (flag, scheme) in Scheme::ALL {
        let (_, mut job) = samples::sample(scheme).unwrap();
        job.metadata.name = Some(format!("{flag}-{}", install.what));
        job.metadata.namespace = Some(ns.name().to_owned());
        for spec in samples::replica_specs_mut(&mut job).unwrap().values_mut() {
            spec["template"]["metadata"]["annotations"][key] = json!(value);
        }
        let api: Api<DynamicObject> =
            Api::namespaced_with(ns.client(), ns.name(), &samples::api_resource(scheme));
        api.create(&PostParams::default(), &job).await.unwrap();
        jobs.push((api, job.metadata.name.unwrap()));
    }
    // An MPIJob in training-operator's v1, through the replicas' own conversion webhook (once
    // one of them has pointed the CRD at itself).
    let (_, mut job) = samples::sample(Scheme::MpiJob).unwrap();
    let name = format!("mpijob-v1-{}", install.what);
    job.metadata.name = Some(name.clone());
    job.types = Some(TypeMeta {
        api_version: "kubeflow.org/v1".into(),
        kind: "MPIJob".into(),
    });
    for spec in samples::replica_specs_mut(&mut job).unwrap().values_mut() {
        spec["template"]["metadata"]["annotations"][key] = json!(value);
    }
    let mut v1 = samples::api_resource(Scheme::MpiJob);
    v1.version = "v1".into();
    v1.api_version = "kubeflow.org/v1".into();
    let api: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &v1);
    wait::until(&format!("{name} created as v1"), Duration::from_secs(60), || {
        let (api, job) = (api.clone(), job.clone());
        async move { Ok(api.create(&PostParams::default(), &job).await.ok().map(|_| ())) }
    })
    .await
    .unwrap();
    jobs.push((api, name));
    for (api, name) in &jobs {
        let done = wait::until(&format!("{name} Succeeded"), Duration::from_secs(120), || {
            let api = api.clone();
            let name = name.clone();
            async move {
                let job = api.get(&name).await.ok();
                Ok(job
                    .filter(|j| status(j).is(JobConditionType::Succeeded))
                    .map(|_| ()))
            }
        })
        .await;
        if let Err(error) = done {
            let job = api.get(name).await.unwrap();
            let logs: Vec<String> = replicas.iter().map(Replica::log).collect();
            panic!(
                "{}: {error}; status {:?}; replica logs:\n{}",
                install.what,
                job.data.get("status"),
                logs.join("\n---\n")
            );
        }
    }

    let mut measured = Measured {
        requests: 0.0,
        forbidden: 0.0,
        elapsed: Duration::ZERO,
    };
    for replica in &replicas {
        let (code, metrics) = replica.get("/metrics").unwrap();
        assert_eq!(code, 200, "{}", install.what);
        measured.requests += requests(&metrics, |_| true);
        measured.forbidden += requests(&metrics, |l| l.get("code") == Some(&"403"));
        let log = replica.log();
        assert!(!log.contains("orbidden"), "{}: {log}", install.what);
    }
    // Gone before the next install's operator starts: watching every namespace, it would
    // otherwise meet these jobs while their namespace terminates, where creates answer 403.
    // The replicas stay until then: the namespace controller lists MPIJobs in v1, the
    // preferred version, through their conversion webhook.
    let name = ns.name().to_owned();
    ns.delete().await.unwrap();
    let namespaces: Api<Namespace> = Api::all(admin);
    wait::until(
        &format!("namespace {name} gone"),
        Duration::from_secs(120),
        || {
            let namespaces = namespaces.clone();
            let name = name.clone();
            async move {
                Ok(namespaces
                    .get_opt(&name)
                    .await
                    .ok()
                    .and_then(|n| n.is_none().then_some(())))
            }
        },
    )
    .await
    .unwrap();
    drop(replicas);
    measured.elapsed = started.elapsed();
    measured
}

/// The chart, then each overlay, applied in turn (they share the cluster-wide names) and run
/// through one job of each kind as the installed ServiceAccount: 0 forbidden responses.
#[tokio::test]
async fn chart_and_overlays_install_and_run_every_kind_without_a_forbidden_response() {
    let env = TestEnv::shared().unwrap();
    let dir = std::env::temp_dir().join(format!("kfop-install-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let installs = [
        check("helm", helm_template(&[]), HELM_NAMESPACE),
        check(
            "standalone",
            kustomize_build(&overlay("standalone")),
            "kfop-system",
        ),
        check("kubeflow", kustomize_build(&overlay("kubeflow")), "kubeflow"),
    ];
    // The chart's replicas run from the image (as a cluster would run the chart); the overlays'
    // from the binary cargo built, the same code.
    let from_image = image().operator();
    let from_cargo = Operator::cargo();
    for install in &installs {
        let operator = if install.what == "helm" {
            &from_image
        } else {
            &from_cargo
        };
        let measured = install_and_run(env, install, operator, &dir).await;
        eprintln!(
            "{} ({}): {} objects applied, 8 jobs Succeeded, {} requests, {} forbidden, in {:?}",
            install.what,
            operator.what,
            install.docs.len(),
            measured.requests,
            measured.forbidden,
            measured.elapsed
        );
        assert!(measured.requests > 0.0, "{}: no request counted", install.what);
        assert_eq!(measured.forbidden, 0.0, "{}: forbidden responses", install.what);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// How a replica's process starts: a program and the arguments before the operator's own.
#[derive(Debug)]
struct Operator {
    what: &'static str,
    program: PathBuf,
    leading: Vec<OsString>,
    /// Only the variables the replica sets (a container starts with the Deployment's env alone).
    clear_env: bool,
}

impl Operator {
    fn cargo() -> Self {
        Self {
            what: "cargo's binary",
            program: PathBuf::from(env!("CARGO_BIN_EXE_kfop-operator")),
            leading: Vec::new(),
            clear_env: false,
        }
    }

    fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        command.args(&self.leading);
        if self.clear_env {
            command.env_clear();
        }
        command
    }
}

/// The image `scripts/image.sh --debug` packs from the binary this test runs, and its files as
/// `crane export` unpacks them into a fresh root.
#[derive(Debug)]
struct Image {
    archive: PathBuf,
    /// The OCI image layout the archive holds, unpacked.
    layout: PathBuf,
    root: PathBuf,
    /// Every file of the root, by its path in the image (`/kfop-operator`, ...).
    files: BTreeSet<String>,
    version: String,
    packed_in: Duration,
}

/// Packed and unpacked once per test process (both tests use it).
fn image() -> &'static Image {
    static IMAGE: OnceLock<Image> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let started = Instant::now();
        let dir = std::env::temp_dir().join(format!("kfop-image-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let archive = dir.join("kfop-operator.oci.tar");
        let script = repo_root().join("scripts/image.sh");
        let out = run(
            Path::new("bash"),
            &[
                script.to_str().unwrap(),
                "--debug",
                "--out",
                archive.to_str().unwrap(),
            ],
        );
        let last = out.lines().last().unwrap_or_default();
        assert_eq!(Path::new(last), archive, "image.sh's last line: {out}");
        let packed_in = started.elapsed();

        // The OCI layout the archive holds, pushed as a user pushes it, and the image's
        // filesystem read back with `crane export`.
        let layout = dir.join("layout");
        std::fs::create_dir_all(&layout).unwrap();
        run(
            Path::new("tar"),
            &["-xf", archive.to_str().unwrap(), "-C", layout.to_str().unwrap()],
        );
        let registry = Registry::start();
        let reference = format!("{}/kfop-operator:unpacked", registry.host);
        let crane = tool("crane");
        run(&crane, &["push", layout.to_str().unwrap(), &reference]);
        let flat = dir.join("rootfs.tar");
        run(&crane, &["export", &reference, flat.to_str().unwrap()]);
        let root = dir.join("root");
        std::fs::create_dir_all(&root).unwrap();
        run(
            Path::new("tar"),
            &["-xf", flat.to_str().unwrap(), "-C", root.to_str().unwrap()],
        );
        let files = files_under(&root, &root);
        // What the image runs is the binary this test was built with, not an older one.
        let packed = std::fs::read(root.join("kfop-operator")).unwrap();
        let built = std::fs::read(env!("CARGO_BIN_EXE_kfop-operator")).unwrap();
        assert!(
            packed == built,
            "the image holds another binary than {}",
            env!("CARGO_BIN_EXE_kfop-operator")
        );
        Image {
            archive,
            layout,
            root,
            files,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            packed_in,
        }
    })
}

/// The files under `dir` (recursively), as absolute paths inside `root`.
fn files_under(root: &Path, dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(root, &path));
        } else {
            out.insert(format!("/{}", path.strip_prefix(root).unwrap().display()));
        }
    }
    out
}

impl Image {
    /// The image's dynamic loader (`/lib64/ld-linux-x86-64.so.2` on x86_64).
    fn loader(&self) -> &str {
        let mut loaders = self.files.iter().filter(|f| {
            Path::new(f.as_str())
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("ld-linux"))
        });
        let loader = loaders
            .next()
            .unwrap_or_else(|| panic!("no loader in {:?}", self.files));
        assert!(loaders.next().is_none(), "two loaders in {:?}", self.files);
        loader
    }

    /// The replica as the image runs it: the image's loader with only the image's library
    /// folders, on the image's binary.
    fn operator(&self) -> Operator {
        let loader = self.loader();
        let dirs: BTreeSet<&Path> = self
            .files
            .iter()
            .filter(|f| f.contains(".so") && f.as_str() != loader)
            .filter_map(|f| Path::new(f.as_str()).parent())
            .collect();
        let library_path: Vec<String> = dirs
            .iter()
            .map(|d| self.root.join(d.strip_prefix("/").unwrap()).display().to_string())
            .collect();
        Operator {
            what: "the image's files",
            program: self.root.join(loader.trim_start_matches('/')),
            leading: vec![
                "--library-path".into(),
                library_path.join(":").into(),
                self.root.join("kfop-operator").into(),
            ],
            clear_env: true,
        }
    }
}

/// crane's registry on a free loopback port, for crane's remote-only commands (push, config,
/// manifest). Stopped when dropped.
struct Registry {
    child: Child,
    host: String,
}

impl Registry {
    fn start() -> Self {
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let child = Command::new(tool("crane"))
            .args(["registry", "serve", "--address", &addr.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err() {
            assert!(
                Instant::now() < deadline,
                "crane registry on {addr} never listened"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Self {
            child,
            host: addr.to_string(),
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every container and init container image of every pod template in `docs`.
fn container_images(docs: &[Value]) -> Vec<String> {
    let mut images = Vec::new();
    for doc in docs {
        let spec = &doc["spec"]["template"]["spec"];
        for list in ["initContainers", "containers"] {
            for container in spec[list].as_array().into_iter().flatten() {
                images.push(container["image"].as_str().unwrap_or_default().to_owned());
            }
        }
    }
    images
}

/// The image holds the binary and exactly the libraries it loads, in one layer, runs as
/// 65532:65532 with entrypoint /kfop-operator and the OCI labels; the Dockerfile labels the
/// same; the chart runs exactly the image it is given. (The plane test runs its replicas.)
#[test]
fn image_holds_the_operator_and_its_libraries_and_the_chart_runs_it() {
    let image = image();
    let crane = tool("crane");
    let version = image.version.as_str();

    // The binary, its loader and the libraries the loader resolves for it in the image: libc,
    // libm and libgcc_s. Nothing else, no shell.
    let loader = image.loader();
    assert!(image.files.contains("/kfop-operator"), "{:?}", image.files);
    let names: BTreeSet<String> = image
        .files
        .iter()
        .filter(|f| f.as_str() != "/kfop-operator" && f.as_str() != loader)
        .map(|f| Path::new(f).file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for needed in ["libc.so.6", "libm.so.6", "libgcc_s.so.1"] {
        assert!(names.contains(needed), "{needed} missing: {:?}", image.files);
    }
    let ldd = run(Path::new("ldd"), &[env!("CARGO_BIN_EXE_kfop-operator")]);
    for name in &names {
        assert!(
            ldd.contains(name.as_str()),
            "{name} is in the image, not in ldd's\n{ldd}"
        );
    }
    assert!(
        !image.files.iter().any(|f| f.ends_with("/sh")),
        "{:?}",
        image.files
    );
    // The image's own loader and libraries run the image's binary (no file of the host's).
    let operator = image.operator();
    let help = operator.command().arg("--help").output().unwrap();
    assert!(
        help.status.success() && String::from_utf8_lossy(&help.stdout).contains("--enable-scheme"),
        "{operator:?} --help: {help:?}"
    );

    // Through crane's registry, as `crane push` documents it in scripts/image.sh.
    let registry = Registry::start();
    let repository = format!("{}/kfop-operator", registry.host);
    let tag = format!("{version}-test");
    let reference = format!("{repository}:{tag}");
    run(&crane, &["push", image.layout.to_str().unwrap(), &reference]);
    let config: Value = serde_json::from_str(&run(&crane, &["config", &reference])).unwrap();
    let manifest: Value = serde_json::from_str(&run(&crane, &["manifest", &reference])).unwrap();
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1, "one layer: {manifest}");
    // An OCI image archive: the layout's marker, and an index naming the one OCI manifest.
    let marker: Value =
        serde_json::from_str(&std::fs::read_to_string(image.layout.join("oci-layout")).unwrap()).unwrap();
    assert_eq!(marker["imageLayoutVersion"], "1.0.0", "{marker}");
    let index: Value =
        serde_json::from_str(&std::fs::read_to_string(image.layout.join("index.json")).unwrap()).unwrap();
    let entries = index["manifests"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{index}");
    assert_eq!(
        entries[0]["mediaType"], "application/vnd.oci.image.manifest.v1+json",
        "{index}"
    );
    assert_eq!(
        entries[0]["annotations"]["org.opencontainers.image.ref.name"],
        format!("kfop-operator:{version}"),
        "{index}"
    );
    assert_eq!(
        manifest["mediaType"], "application/vnd.oci.image.manifest.v1+json",
        "{manifest}"
    );
    let compressed = layers[0]["size"].as_u64().unwrap();
    let archive = std::fs::metadata(&image.archive).unwrap().len();
    eprintln!(
        "image (debug binary): {compressed} bytes compressed ({:.1} MiB), archive {archive} \
         bytes, {} files, packed in {:?}",
        compressed as f64 / 1048576.0,
        image.files.len(),
        image.packed_in
    );
    let runs = &config["config"];
    assert_eq!(runs["User"], "65532:65532", "{config}");
    assert_eq!(runs["Entrypoint"], json!(["/kfop-operator"]), "{config}");
    assert!(runs["Cmd"].is_null(), "{config}");
    assert_eq!(config["os"], "linux", "{config}");
    let labels = &runs["Labels"];
    assert_eq!(labels["org.opencontainers.image.version"], version, "{config}");
    assert_eq!(
        labels["org.opencontainers.image.title"], "kfop-operator",
        "{config}"
    );
    // The commit packed, or `unknown` outside a git checkout.
    let head = Command::new("git")
        .arg("-C")
        .arg(repo_root())
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(
            || "unknown".to_owned(),
            |o| String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        );
    assert_eq!(
        labels["org.opencontainers.image.revision"],
        head.as_str(),
        "{config}"
    );
    let source = labels["org.opencontainers.image.source"].as_str().unwrap();
    assert!(source.starts_with("https://"), "{config}");

    // The benchmark's fault hooks never reach a release image: the operator as image.sh and the
    // Dockerfile build it (`-p kfop-operator` alone) resolves kfop-runtime without
    // `fault-injection`, and image.sh refuses a release binary holding a hook's name. The binary
    // packed here is the test suite's, built with the benchmark, so it does hold one: the
    // string image.sh looks for is the one the hooks read.
    let features = run(
        Path::new("cargo"),
        &[
            "tree",
            "--quiet",
            "-p",
            "kfop-operator",
            "-e",
            "features,normal",
            "--prefix",
            "none",
        ],
    );
    assert!(features.contains("kfop-runtime feature \"v1_37\""), "{features}");
    assert!(!features.contains("fault-injection"), "{features}");
    let packed = std::fs::read(image.root.join("kfop-operator")).unwrap();
    let hook = b"KFOP_FAULT_DROP_CHILD_EVENTS_OF";
    assert!(
        packed.windows(hook.len()).any(|w| w == hook),
        "the suite's operator lost its fault hook, so image.sh's check looks for a stale name"
    );
    let script = std::fs::read_to_string(repo_root().join("scripts/image.sh")).unwrap();
    assert!(
        script.contains("grep -q KFOP_FAULT_"),
        "image.sh lost its fault-hook check"
    );

    // The Dockerfile (not buildable here) makes the same image: same user, entrypoint, labels.
    let dockerfile = std::fs::read_to_string(repo_root().join("Dockerfile")).unwrap();
    for line in [
        "FROM scratch".to_owned(),
        "USER 65532:65532".to_owned(),
        r#"ENTRYPOINT ["/kfop-operator"]"#.to_owned(),
        format!("ARG VERSION={version}"),
        format!(r#"org.opencontainers.image.source="{source}""#),
        r#"org.opencontainers.image.title="kfop-operator""#.to_owned(),
        format!(
            r#"org.opencontainers.image.description="{}""#,
            labels["org.opencontainers.image.description"].as_str().unwrap()
        ),
    ] {
        assert!(dockerfile.contains(&line), "the Dockerfile lacks {line}");
    }

    // The chart runs its own version by default, and exactly the image it is given.
    let default = container_images(&helm_template(&[]));
    assert_eq!(default, vec![format!("kfop-operator:{version}")]);
    let set = format!("image.repository={repository},image.tag={tag}");
    let images = container_images(&helm_template(&["--set", &set]));
    assert!(!images.is_empty());
    for found in &images {
        assert_eq!(found, &reference, "{images:?}");
    }
}
