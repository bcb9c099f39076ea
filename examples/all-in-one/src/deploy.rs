//! Install manifests for the all-in-one operator: the CRDs of the enabled kinds, a
//! least-privilege ClusterRole, and a Deployment running as non-root. `kfop-operator deploy`
//! prints them; `deploy/kfop-operator.yaml` is the committed copy (a test keeps it current).
use std::collections::BTreeSet;

use crate::schemes::Scheme;

/// Where the Deployment and its ServiceAccount live.
pub const NAMESPACE: &str = "kubeflow";
/// The name of the Deployment, its ServiceAccount, ClusterRole and ClusterRoleBinding.
pub const NAME: &str = "kfop-operator";

/// The user name the API server gives the operator's ServiceAccount (to impersonate it).
pub fn service_account_user() -> String {
    format!("system:serviceaccount:{NAMESPACE}:{NAME}")
}

/// The groups the API server gives every ServiceAccount of [`NAMESPACE`].
pub fn service_account_groups() -> [String; 3] {
    [
        "system:serviceaccounts".to_owned(),
        format!("system:serviceaccounts:{NAMESPACE}"),
        "system:authenticated".to_owned(),
    ]
}

/// The ServiceAccount, its least-privilege ClusterRole and their binding, as one YAML stream.
pub fn rbac(enabled: &BTreeSet<Scheme>) -> String {
    let plurals: Vec<String> = enabled
        .iter()
        .map(|s| crate::crds::of(*s).spec.names.plural)
        .collect();
    let resources: Vec<String> = plurals
        .iter()
        .flat_map(|p| [p.clone(), format!("{p}/status"), format!("{p}/finalizers")])
        .map(|r| format!("\"{r}\""))
        .collect();
    format!(
        r#"apiVersion: v1
kind: ServiceAccount
metadata:
  name: {NAME}
  namespace: {NAMESPACE}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {NAME}
rules:
  - apiGroups: ["kubeflow.org"]
    resources: [{resources}]
    verbs: ["get", "list", "watch", "update", "patch", "delete"]
  - apiGroups: [""]
    resources: ["pods", "services", "configmaps", "secrets"]
    verbs: ["get", "list", "watch", "create", "patch", "delete"]
  - apiGroups: ["batch"]
    resources: ["jobs"]
    verbs: ["get", "list", "watch", "create", "patch", "delete"]
  - apiGroups: ["autoscaling"]
    resources: ["horizontalpodautoscalers"]
    verbs: ["get", "list", "watch", "create", "patch", "delete"]
  - apiGroups: ["scheduling.volcano.sh", "scheduling.x-k8s.io"]
    resources: ["podgroups"]
    verbs: ["get", "list", "watch", "create", "patch", "delete"]
  - apiGroups: ["scheduling.k8s.io"]
    resources: ["priorityclasses"]
    verbs: ["get", "list", "watch"]
  - apiGroups: ["", "events.k8s.io"]
    resources: ["events"]
    verbs: ["create", "patch"]
  - apiGroups: ["coordination.k8s.io"]
    resources: ["leases"]
    verbs: ["get", "create", "update", "patch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {NAME}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {NAME}
subjects:
  - kind: ServiceAccount
    name: {NAME}
    namespace: {NAMESPACE}
"#,
        resources = resources.join(", ")
    )
}

fn deployment() -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: {NAME}
  namespace: {NAMESPACE}
  labels:
    app.kubernetes.io/name: {NAME}
spec:
  replicas: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: {NAME}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: {NAME}
      annotations:
        prometheus.io/scrape: "true"
        prometheus.io/port: "8080"
    spec:
      serviceAccountName: {NAME}
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        seccompProfile:
          type: RuntimeDefault
      containers:
        - name: operator
          image: {NAME}:latest
          args: ["--leader-elect", "--metrics-bind-address=0.0.0.0:8080"]
          env:
            - name: MY_POD_NAMESPACE
              valueFrom:
                fieldRef:
                  fieldPath: metadata.namespace
            - name: MY_POD_NAME
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
          ports:
            - name: metrics
              containerPort: 8080
          livenessProbe:
            httpGet:
              path: /healthz
              port: 8080
          readinessProbe:
            httpGet:
              path: /readyz
              port: 8080
          resources:
            requests:
              cpu: 100m
              memory: 64Mi
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: ["ALL"]
"#
    )
}

/// CRDs, RBAC and Deployment as one YAML stream.
pub fn manifests(enabled: &BTreeSet<Scheme>) -> kfop_runtime::Result<String> {
    Ok(format!(
        "{}---\n{}---\n{}",
        crate::crds::yaml(enabled)?,
        rbac(enabled),
        deployment()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `deploy/kfop-operator.yaml` is current; `KFOP_BLESS=1` rewrites it.
    #[test]
    fn committed_manifests_are_current() {
        let all = crate::schemes::parse(&[]).unwrap();
        let text = manifests(&all).unwrap();
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kfop-operator.yaml");
        if std::env::var_os("KFOP_BLESS").is_some() {
            std::fs::write(&path, &text).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == text,
            "deploy/kfop-operator.yaml is stale; run `KFOP_BLESS=1 cargo test -p kfop-operator`"
        );
    }

    #[test]
    fn rbac_covers_every_enabled_kind_and_runs_as_non_root() {
        let text = manifests(&crate::schemes::parse(&["tfjob".into()]).unwrap()).unwrap();
        assert!(text.contains("\"tfjobs/status\"") && !text.contains("pytorchjobs"));
        assert!(text.contains("runAsNonRoot: true"));
    }
}
