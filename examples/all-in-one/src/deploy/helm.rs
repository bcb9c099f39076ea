//! The Helm chart `charts/kfop`: the objects of [`super`] as templates, the settings and the
//! operator's flags as values.yaml, the CRDs in `crds/` (Helm installs those before the
//! templates and, by its design, never upgrades or deletes them).
use std::collections::BTreeSet;
use std::path::PathBuf;

use super::flags::{self, Kind};
use super::yaml::{Yaml, scalar};
use super::{DeployError, GENERATED, Generated, Mode};
use crate::schemes::Scheme;

/// The chart's folder, from the repository root.
pub const DIR: &str = "charts/kfop";

/// A Go-template comment: the templates' header, kept out of the rendered objects.
fn template_header() -> String {
    format!("{{{{- /* {} */ -}}}}\n", GENERATED.trim_start_matches("# "))
}

fn chart_yaml() -> String {
    let version = env!("CARGO_PKG_VERSION");
    format!(
        r#"{GENERATED}
apiVersion: v2
name: kfop
description: The kfop all-in-one training operator (TFJob, PyTorchJob, MPIJob, XGBoostJob, PaddleJob, JAXJob, MXJob)
type: application
version: {version}
appVersion: {app}
kubeVersion: ">=1.29.0-0"
keywords: [kubeflow, training, operator]
"#,
        app = scalar(version),
    )
}

/// values.yaml: the settings, then every operator flag under `flags:` with its `--help` line.
pub fn values_yaml() -> String {
    let mut out = format!("{GENERATED}\n");
    for (key, comment, value) in super::settings() {
        if !comment.is_empty() {
            out.push('\n');
            for line in comment.lines() {
                out.push_str(&format!("# {line}\n"));
            }
        }
        out.push_str(&Yaml::Map(vec![(key.to_owned(), value)]).block(0));
    }
    out.push_str(
        "\n# The operator's flags (`kfop-operator --help`), one value each, passed as `--<flag>=<value>`.\n\
         # Empty values are not passed: the operator's own fallback applies (named in the comment).\nflags:\n",
    );
    for flag in flags::all() {
        out.push_str(&format!("  # --{}: {}", flag.long, flag.help.replace('\n', " ")));
        let value = match &flag.kind {
            Kind::Switch(on) => on.to_string(),
            Kind::Value {
                default,
                number: true,
            } => default.clone(),
            Kind::Value {
                default,
                number: false,
            } => scalar(default),
            Kind::Optional { .. } => "\"\"".to_owned(),
        };
        out.push_str(&format!("\n  {}: {value}\n", flag.key));
    }
    out
}

fn helpers() -> String {
    format!(
        r#"{header}
{{{{/* The name of every object; kfop's objects are cluster-wide (CRDs, ClusterRole), so one release per cluster. */}}}}
{{{{- define "kfop.fullname" -}}}}
{{{{- default "{name}" .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}}}
{{{{- end -}}}}

{{{{- define "kfop.serviceAccountName" -}}}}
{{{{- if .Values.serviceAccount.create -}}}}
{{{{- default (include "kfop.fullname" .) .Values.serviceAccount.name -}}}}
{{{{- else -}}}}
{{{{- default "default" .Values.serviceAccount.name -}}}}
{{{{- end -}}}}
{{{{- end -}}}}

{{{{/* The pods' selector: stable across upgrades (a Deployment's selector is immutable). */}}}}
{{{{- define "kfop.selectorLabels" -}}}}
app.kubernetes.io/name: {{{{ include "kfop.fullname" . }}}}
{{{{- end -}}}}

{{{{- define "kfop.labels" -}}}}
{{{{ include "kfop.selectorLabels" . }}}}
app.kubernetes.io/instance: {{{{ .Release.Name }}}}
app.kubernetes.io/version: {{{{ .Chart.AppVersion | quote }}}}
app.kubernetes.io/managed-by: {{{{ .Release.Service }}}}
helm.sh/chart: {{{{ printf "%s-%s" .Chart.Name .Chart.Version }}}}
{{{{- end -}}}}

{{{{/* The port of flags.metricsBindAddress (host:port or [v6]:port): probes and the Service use it. */}}}}
{{{{- define "kfop.metricsPort" -}}}}
{{{{- .Values.flags.metricsBindAddress | toString | splitList ":" | last -}}}}
{{{{- end -}}}}

{{{{/* The port of flags.webhookBindAddress: the conversion webhook's Service targets it. */}}}}
{{{{- define "kfop.webhookPort" -}}}}
{{{{- .Values.flags.webhookBindAddress | toString | splitList ":" | last -}}}}
{{{{- end -}}}}
"#,
        header = template_header().trim_end(),
        name = super::NAME,
    )
}

/// The chart's files, from the repository root.
pub fn files(enabled: &BTreeSet<Scheme>) -> Result<Vec<Generated>, DeployError> {
    let m = Mode::Helm;
    let template = |name: &str, text: String| Generated {
        path: PathBuf::from(format!("{DIR}/templates/{name}")),
        text: format!("{}{text}", template_header()),
    };
    let mut files = vec![
        Generated {
            path: PathBuf::from(format!("{DIR}/Chart.yaml")),
            text: chart_yaml(),
        },
        Generated {
            path: PathBuf::from(format!("{DIR}/values.yaml")),
            text: values_yaml(),
        },
        Generated {
            path: PathBuf::from(format!("{DIR}/templates/_helpers.tpl")),
            text: helpers(),
        },
        template("serviceaccount.yaml", super::service_account_object(m)),
        template("clusterrole.yaml", super::cluster_role(m, enabled)),
        template("clusterrolebinding.yaml", super::cluster_role_binding(m)),
        template("runtime-frameworks-rbac.yaml", super::runtime_frameworks_rbac(m)),
        template("deployment.yaml", super::deployment(m)?),
        template("poddisruptionbudget.yaml", super::pod_disruption_budget(m)),
        template("service.yaml", super::metrics_service(m)?),
        template("webhook-service.yaml", super::webhook_service_object(m)),
        template("created-as-policy.yaml", super::created_as_policy(enabled)),
        template(
            "servicemonitor.yaml",
            m.when("serviceMonitor.enabled", super::service_monitor(m)),
        ),
    ];
    for crd in crate::crds::all(enabled) {
        files.push(Generated {
            path: PathBuf::from(format!("{DIR}/crds/{}.yaml", crd.spec.names.plural)),
            text: format!("{GENERATED}\n{}", kfop_runtime::crd_yaml(&crd)?),
        });
    }
    Ok(files)
}
