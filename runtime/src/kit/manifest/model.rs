//! The framework manifest (`kfop.yaml`): parsing with source positions, and validation into a
//! [`Model`] that `kfop gen` renders and the operator loads at run time. Every error is one line: `file:line:column: field: problem; fix`.
//! A manifest that loads but should change (a deprecated spelling) also gets
//! [`ManifestWarning`]s, one line each in the same form, from [`parse_with_warnings`] and
//! [`load_with_warnings`].
use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::env::Template;
use crate::status_rule::RuleWording;
use heck::{ToSnakeCase, ToUpperCamelCase};
use serde::Deserialize;
use serde_saphyr::Spanned;

pub const API_VERSION: &str = "kfop.dev/v1alpha1";
pub const KIND: &str = "Framework";
pub const FILE_NAME: &str = "kfop.yaml";

/// A manifest problem, pointing at the line and field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ManifestError {
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
    pub field: String,
    pub message: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        located(f, &self.file, self.line, self.column, &self.field, &self.message)
    }
}

/// A manifest that loads but should change, e.g. a deprecated spelling, which is read as the
/// spelling that replaces it, to an equal [`Model`]. Shown as a [`ManifestError`] is:
/// `file:line:column: field: message`, one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestWarning {
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
    pub field: String,
    pub message: String,
}

impl fmt::Display for ManifestWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        located(f, &self.file, self.line, self.column, &self.field, &self.message)
    }
}

/// `file:line:column: field: message`, on one line.
fn located(
    f: &mut fmt::Formatter<'_>,
    file: &Path,
    line: usize,
    column: usize,
    field: &str,
    message: &str,
) -> fmt::Result {
    write!(f, "{}:{line}:{column}: ", file.display())?;
    if !field.is_empty() {
        write!(f, "{field}: ")?;
    }
    // Messages quote the manifest's values, which may hold line breaks: escape them so the
    // message stays one line.
    for c in message.chars() {
        if c.is_control() {
            write!(f, "{}", c.escape_debug())?;
        } else {
            write!(f, "{c}")?;
        }
    }
    Ok(())
}

/// A valid manifest: its model and what should change in it (nothing for a manifest in the
/// current spelling).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validated {
    pub model: Model,
    pub warnings: Vec<ManifestWarning>,
}

type S<T> = Spanned<T>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Raw {
    api_version: S<String>,
    kind: S<String>,
    metadata: RawMetadata,
    spec: RawSpec,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMetadata {
    name: S<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawSpec {
    group: S<String>,
    version: S<String>,
    kind: S<String>,
    plural: Option<S<String>>,
    #[serde(default)]
    short_names: Vec<S<String>>,
    controller_name: Option<S<String>>,
    framework_name: Option<S<String>>,
    replica_specs_field: Option<S<String>>,
    container: RawContainer,
    roles: S<Vec<RawRole>>,
    scale: Option<S<String>>,
    #[serde(default)]
    resources: Vec<S<String>>,
    #[serde(default)]
    env: Vec<RawEnv>,
    /// Deprecated: `status.success`, which it is read as.
    success: Option<S<Vec<S<RawSuccess>>>>,
    status: Option<RawStatus>,
    master_pods: Option<S<String>>,
    #[serde(default)]
    hooks: bool,
    /// Spec fields besides the replica specs that the generated end-to-end test's job sets.
    #[serde(default)]
    test_job: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawStatus {
    rule: Option<S<String>>,
    leader: Option<S<String>>,
    followers: Option<S<String>>,
    subject: Option<S<String>>,
    #[serde(default)]
    exit_code_restart_events: bool,
    /// `rule: cel`: the CEL expression that makes the job succeed.
    succeeded: Option<S<String>>,
    /// `rule: cel`: the CEL expression that says the job runs.
    running: Option<S<String>>,
    /// `rule: cel`: the CEL expression that makes the job fail.
    failed: Option<S<String>>,
    /// `rule: successRules` (the default): the success rules, the first role present deciding.
    success: Option<S<Vec<S<RawSuccess>>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawContainer {
    name: S<String>,
    /// Every replica must run a container of this name, as Kubeflow's v1 webhooks require.
    #[serde(default)]
    required: bool,
    port_name: Option<S<String>>,
    port: Option<S<i64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawRole {
    name: S<String>,
    #[serde(default)]
    master: bool,
    /// Every job must have a replica spec of this role.
    #[serde(default)]
    required: bool,
    restart_policy: Option<S<String>>,
    min_replicas: Option<S<i32>>,
    max_replicas: Option<S<i32>>,
    default_replicas: Option<S<i32>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawEnv {
    name: S<String>,
    value: Option<S<String>>,
    field_ref: Option<S<String>>,
    #[serde(default)]
    roles: Vec<S<String>>,
    #[serde(default)]
    requires: Vec<S<String>>,
    #[serde(default)]
    unless: Vec<S<String>>,
    index: Option<S<i32>>,
    containers: Option<S<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawSuccess {
    all_of: Option<S<String>>,
    any_of: Option<S<String>>,
    index_zero_of: Option<S<String>>,
}

/// The validated manifest: everything the templates need, in plain values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Model {
    /// `metadata.name`, e.g. `foo`; the crate is `<name>-operator`.
    pub name: String,
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub short_names: Vec<String>,
    pub controller_name: String,
    pub framework_name: String,
    /// JSON name of the replica-specs map, e.g. `fooReplicaSpecs`; its Rust field in snake case.
    pub replica_specs_field: String,
    pub replica_specs_rust: String,
    pub container: String,
    /// Every replica must run `container`.
    pub container_required: bool,
    /// The default port's name and number, if any.
    pub port: Option<(String, i32)>,
    pub roles: Vec<RoleModel>,
    pub scale: Option<String>,
    pub resources: BTreeSet<Resource>,
    pub env: Vec<EnvModel>,
    /// Success rules (`status.success`, or the deprecated `spec.success`), first role present
    /// in the job decides.
    pub success: Vec<(SuccessKind, String)>,
    pub status: StatusModel,
    /// Pod 0 of every role is the master (`masterPods: indexZero`), not the `master` roles.
    pub master_index_zero: bool,
    /// `src/hooks.rs` implements the framework's hooks.
    pub hooks: bool,
    /// Extra spec fields of the generated test's job, each as (JSON name, JSON value text).
    pub test_job: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleModel {
    pub name: String,
    pub master: bool,
    /// Every job must have this role.
    pub required: bool,
    pub restart_policy: String,
    pub min_replicas: Option<i32>,
    pub max_replicas: Option<i32>,
    pub default_replicas: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvModel {
    pub name: String,
    /// A template (validated) or a downward-API field path.
    pub value: Option<String>,
    pub field_ref: Option<String>,
    pub roles: Vec<String>,
    pub requires: Vec<String>,
    pub unless: Vec<String>,
    pub index: Option<i32>,
    pub all_containers: bool,
}

/// How the job's conditions are set (`spec.status`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatusModel {
    SuccessRules(RuleWording),
    LeaderOrFollowers {
        leader: Option<String>,
        followers: String,
    },
    Hook,
    /// CEL expressions over the roles' counts (see [`crate::cel_rule`]), each checked to
    /// compile.
    Cel {
        succeeded: String,
        running: Option<String>,
        failed: Option<String>,
        wording: RuleWording,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SuccessKind {
    AllOf,
    AnyOf,
    IndexZeroOf,
}

impl SuccessKind {
    pub fn variant(self) -> &'static str {
        match self {
            Self::AllOf => "AllOf",
            Self::AnyOf => "AnyOf",
            Self::IndexZeroOf => "IndexZeroOf",
        }
    }
}

/// Kubernetes objects a framework's operator creates besides its job kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Resource {
    Pods,
    Services,
    ConfigMaps,
    Secrets,
    Jobs,
    PodGroups,
    HorizontalPodAutoscalers,
}

impl Resource {
    const ALL: [(&'static str, Self); 7] = [
        ("pods", Self::Pods),
        ("services", Self::Services),
        ("configmaps", Self::ConfigMaps),
        ("secrets", Self::Secrets),
        ("jobs", Self::Jobs),
        ("podgroups", Self::PodGroups),
        ("horizontalpodautoscalers", Self::HorizontalPodAutoscalers),
    ];

    /// The k8s-openapi type of an object the framework's jobs own, under `k8s_openapi::api`;
    /// `None` for the kinds the engine manages itself (pods, services, PodGroups).
    /// As (module, type), e.g. `("core::v1", "ConfigMap")`.
    pub fn owned_type(self) -> Option<(&'static str, &'static str)> {
        match self {
            Self::Pods | Self::Services | Self::PodGroups => None,
            Self::ConfigMaps => Some(("core::v1", "ConfigMap")),
            Self::Secrets => Some(("core::v1", "Secret")),
            Self::Jobs => Some(("batch::v1", "Job")),
            Self::HorizontalPodAutoscalers => Some(("autoscaling::v2", "HorizontalPodAutoscaler")),
        }
    }

    /// The API resource of an owned kind ([`Self::owned_type`]).
    pub fn api_resource(self) -> Option<kube::api::ApiResource> {
        use k8s_openapi::api::{autoscaling, batch, core};
        use kube::api::ApiResource;
        match self {
            Self::Pods | Self::Services | Self::PodGroups => None,
            Self::ConfigMaps => Some(ApiResource::erase::<core::v1::ConfigMap>(&())),
            Self::Secrets => Some(ApiResource::erase::<core::v1::Secret>(&())),
            Self::Jobs => Some(ApiResource::erase::<batch::v1::Job>(&())),
            Self::HorizontalPodAutoscalers => {
                Some(ApiResource::erase::<autoscaling::v2::HorizontalPodAutoscaler>(&()))
            }
        }
    }

    /// (API group, resource) pairs the operator needs full access to.
    pub fn rbac(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Self::Pods => &[("", "pods")],
            Self::Services => &[("", "services")],
            Self::ConfigMaps => &[("", "configmaps")],
            Self::Secrets => &[("", "secrets")],
            Self::Jobs => &[("batch", "jobs")],
            Self::PodGroups => &[
                ("scheduling.volcano.sh", "podgroups"),
                ("scheduling.x-k8s.io", "podgroups"),
                ("scheduling.k8s.io", "podgroups"),
            ],
            Self::HorizontalPodAutoscalers => &[("autoscaling", "horizontalpodautoscalers")],
        }
    }
}

const RESTART_POLICIES: [&str; 4] = ["Always", "OnFailure", "Never", "ExitCode"];

struct Checker<'a> {
    file: &'a Path,
}

impl Checker<'_> {
    fn err<T>(&self, at: &S<T>, field: &str, message: impl Into<String>) -> ManifestError {
        ManifestError {
            file: self.file.to_owned(),
            line: at.referenced.line() as usize,
            column: at.referenced.column() as usize,
            field: field.to_owned(),
            message: message.into(),
        }
    }

    fn warn<T>(&self, at: &S<T>, field: &str, message: impl Into<String>) -> ManifestWarning {
        let ManifestError {
            file,
            line,
            column,
            field,
            message,
        } = self.err(at, field, message);
        ManifestWarning {
            file,
            line,
            column,
            field,
            message,
        }
    }
}

/// Reads and validates the manifest at `path`, dropping its warnings (see
/// [`load_with_warnings`]).
pub fn load(path: &Path) -> Result<Model, ManifestError> {
    load_with_warnings(path).map(|v| v.model)
}

/// Reads and validates the manifest at `path`, with what should change in it.
pub fn load_with_warnings(path: &Path) -> Result<Validated, ManifestError> {
    let text = std::fs::read_to_string(path).map_err(|e| ManifestError {
        file: path.to_owned(),
        line: 0,
        column: 0,
        field: String::new(),
        message: format!("cannot read the manifest: {e}; create one with `kfop new` or pass --manifest"),
    })?;
    parse_with_warnings(&text, path)
}

/// Parses and validates manifest text, dropping its warnings (see [`parse_with_warnings`]);
/// `file` is only used in messages.
pub fn parse(text: &str, file: &Path) -> Result<Model, ManifestError> {
    parse_with_warnings(text, file).map(|v| v.model)
}

/// Parses and validates manifest text, with what should change in it (a deprecated spelling:
/// the model is the one its replacement gives); `file` is only used in messages.
pub fn parse_with_warnings(text: &str, file: &Path) -> Result<Validated, ManifestError> {
    let raw: Raw = serde_saphyr::from_str(text).map_err(|e| syntax_error(&e, file))?;
    validate(raw, &Checker { file })
}

/// The position from the error itself, not its rendering: only errors with a snippet render as
/// `line L column C: message`; the others (e.g. an empty file) end in `at line L, column C`.
pub fn syntax_error(e: &serde_saphyr::Error, file: &Path) -> ManifestError {
    let (line, column) = e
        .location()
        .map_or((0, 0), |at| (at.line() as usize, at.column() as usize));
    // Without a snippet the rendering is one line, with control characters escaped.
    let plain = e.render_with_options(serde_saphyr::render_options! {
        snippets: serde_saphyr::SnippetMode::Off,
    });
    let message = plain
        .strip_suffix(&format!(" at line {line}, column {column}"))
        .unwrap_or(&plain);
    ManifestError {
        file: file.to_owned(),
        line,
        column,
        field: String::new(),
        message: message.to_owned(),
    }
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && s.starts_with(|c: char| c.is_ascii_lowercase())
        && !s.ends_with('-')
}

fn is_upper_camel(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_uppercase()) && s.chars().all(|c| c.is_ascii_alphanumeric())
}

fn validate(raw: Raw, c: &Checker<'_>) -> Result<Validated, ManifestError> {
    let mut warnings = Vec::new();
    if raw.api_version.value != API_VERSION {
        return Err(c.err(&raw.api_version, "apiVersion", format!("must be {API_VERSION}")));
    }
    if raw.kind.value != KIND {
        return Err(c.err(&raw.kind, "kind", format!("must be {KIND}")));
    }
    let name = &raw.metadata.name;
    if !is_dns_label(&name.value) {
        return Err(c.err(
            name,
            "metadata.name",
            "must be lower-case letters, digits and dashes, e.g. `foo`",
        ));
    }
    let spec = raw.spec;
    if !spec.group.value.split('.').all(is_dns_label) || !spec.group.value.contains('.') {
        return Err(c.err(
            &spec.group,
            "spec.group",
            "must be a DNS subdomain such as `kubeflow.org`",
        ));
    }
    let version_ok = spec.version.value.strip_prefix('v').is_some_and(|v| {
        let digits: String = v.chars().take_while(char::is_ascii_digit).collect();
        let rest = &v[digits.len()..];
        !digits.is_empty()
            && (rest.is_empty()
                || ["alpha", "beta"].iter().any(|p| {
                    rest.strip_prefix(p)
                        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
                }))
    });
    if !version_ok {
        return Err(c.err(
            &spec.version,
            "spec.version",
            "must look like v1, v2beta1 or v1alpha2",
        ));
    }
    let kind = &spec.kind.value;
    if !is_upper_camel(kind) {
        return Err(c.err(
            &spec.kind,
            "spec.kind",
            "must be UpperCamelCase letters and digits, e.g. `FooJob`",
        ));
    }
    let plural = match &spec.plural {
        Some(p) if !is_dns_label(&p.value) => {
            return Err(c.err(p, "spec.plural", "must be lower-case, e.g. `foojobs`"));
        }
        Some(p) => p.value.clone(),
        None => format!("{}s", kind.to_lowercase()),
    };
    for (i, short) in spec.short_names.iter().enumerate() {
        if !is_dns_label(&short.value) {
            return Err(c.err(
                short,
                &format!("spec.shortNames[{i}]"),
                "must be lower-case, e.g. `foojob`",
            ));
        }
    }
    let replica_specs_field = spec.replica_specs_field.as_ref().map_or_else(
        || format!("{}ReplicaSpecs", name.value.to_snake_case().replace('_', "")),
        |f| f.value.clone(),
    );
    if let Some(f) = &spec.replica_specs_field
        && !(f.value.starts_with(|ch: char| ch.is_ascii_lowercase())
            && f.value.chars().all(|ch| ch.is_ascii_alphanumeric()))
    {
        return Err(c.err(
            f,
            "spec.replicaSpecsField",
            "must be a lowerCamelCase JSON name, e.g. `fooReplicaSpecs`",
        ));
    }

    let container = spec.container;
    if !is_dns_label(&container.name.value) {
        return Err(c.err(
            &container.name,
            "spec.container.name",
            "must be a DNS label, e.g. `foo`",
        ));
    }
    let port = validate_port(container.port_name.as_ref(), container.port.as_ref(), c)?;

    let roles = validate_roles(&spec.roles, c)?;
    let role_names: Vec<&str> = roles.iter().map(|r| r.name.as_str()).collect();
    let known_role = |s: &S<String>, field: &str| -> Result<String, ManifestError> {
        role_names
            .iter()
            .find(|r| **r == s.value)
            .map(|r| (*r).to_owned())
            .ok_or_else(|| {
                c.err(
                    s,
                    field,
                    format!(
                        "unknown role `{}`; declared roles are {}",
                        s.value,
                        role_names.join(", ")
                    ),
                )
            })
    };
    let scale = spec
        .scale
        .as_ref()
        .map(|s| known_role(s, "spec.scale"))
        .transpose()?;

    let mut resources = BTreeSet::from([Resource::Pods, Resource::Services]);
    for (i, r) in spec.resources.iter().enumerate() {
        let found = Resource::ALL
            .iter()
            .find(|(n, _)| *n == r.value)
            .map(|(_, res)| *res);
        resources.insert(found.ok_or_else(|| {
            let names: Vec<&str> = Resource::ALL.iter().map(|(n, _)| *n).collect();
            c.err(
                r,
                &format!("spec.resources[{i}]"),
                format!("unknown resource `{}`; use {}", r.value, names.join(", ")),
            )
        })?);
    }

    let mut env = Vec::new();
    for (i, e) in spec.env.iter().enumerate() {
        let field = format!("spec.env[{i}]");
        let valid_name = e
            .name
            .value
            .starts_with(|ch: char| ch.is_ascii_alphabetic() || ch == '_')
            && e.name
                .value
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '_');
        if !valid_name {
            return Err(c.err(
                &e.name,
                &format!("{field}.name"),
                "must be a C identifier, e.g. `MASTER_ADDR`",
            ));
        }
        match (&e.value, &e.field_ref) {
            (Some(v), None) => {
                let template = Template::parse(&v.value, &role_names)
                    .map_err(|t| c.err(v, &format!("{field}.value"), t.message))?;
                if template.uses_port() && port.is_none() {
                    return Err(c.err(
                        v,
                        &format!("{field}.value"),
                        "reads {port.<Role>} but the framework declares no port; add spec.container.portName and port",
                    ));
                }
            }
            (None, Some(_)) => {}
            _ => {
                return Err(c.err(
                    &e.name,
                    &field,
                    "give exactly one of `value` (a template) or `fieldRef`",
                ));
            }
        }
        let roles_of = |list: &[S<String>], what: &str| -> Result<Vec<String>, ManifestError> {
            list.iter()
                .enumerate()
                .map(|(j, r)| known_role(r, &format!("{field}.{what}[{j}]")))
                .collect()
        };
        let all_containers = match &e.containers {
            None => true,
            Some(s) if s.value == "all" => true,
            Some(s) if s.value == "default" => false,
            Some(s) => return Err(c.err(s, &format!("{field}.containers"), "must be `all` or `default`")),
        };
        if let Some(index) = &e.index
            && index.value < 0
        {
            return Err(c.err(index, &format!("{field}.index"), "must be 0 or more"));
        }
        env.push(EnvModel {
            name: e.name.value.clone(),
            value: e.value.as_ref().map(|v| v.value.clone()),
            field_ref: e.field_ref.as_ref().map(|v| v.value.clone()),
            roles: roles_of(&e.roles, "roles")?,
            requires: roles_of(&e.requires, "requires")?,
            unless: roles_of(&e.unless, "unless")?,
            index: e.index.as_ref().map(|i| i.value),
            all_containers,
        });
    }

    // The success rules' canonical place is `status.success`; `spec.success` is read as it.
    let status_success = spec.status.as_ref().and_then(|s| s.success.as_ref());
    let success_list = match (&spec.success, status_success) {
        (Some(old), Some(_)) => {
            return Err(c.err(
                old,
                "spec.success",
                "the success rules are given twice, here and in spec.status.success; remove spec.success (deprecated)",
            ));
        }
        (Some(old), None) => {
            warnings.push(c.warn(
                old,
                "spec.success",
                "deprecated: move this list to spec.status.success (the same entries, indented under `status:`); it is read as that",
            ));
            Some(SuccessList {
                list: old,
                field: "spec.success",
            })
        }
        (None, Some(new)) => Some(SuccessList {
            list: new,
            field: "spec.status.success",
        }),
        (None, None) => None,
    };
    let mut success = Vec::new();
    for (i, s) in success_list.iter().flat_map(|l| l.list.value.iter().enumerate()) {
        let field = format!("{}[{i}]", success_list.as_ref().map_or("", |l| l.field));
        let rule = match (&s.value.all_of, &s.value.any_of, &s.value.index_zero_of) {
            (Some(r), None, None) => (SuccessKind::AllOf, known_role(r, &format!("{field}.allOf"))?),
            (None, Some(r), None) => (SuccessKind::AnyOf, known_role(r, &format!("{field}.anyOf"))?),
            (None, None, Some(r)) => (
                SuccessKind::IndexZeroOf,
                known_role(r, &format!("{field}.indexZeroOf"))?,
            ),
            _ => {
                return Err(c.err(
                    s,
                    &field,
                    "give exactly one of allOf, anyOf or indexZeroOf, e.g. `- allOf: Worker`",
                ));
            }
        };
        success.push(rule);
    }

    let status = validate_status(
        spec.status.as_ref(),
        spec.hooks,
        success_list.as_ref().filter(|_| !success.is_empty()),
        Roles {
            names: &role_names,
            known: &known_role,
        },
        c,
    )?;
    let master_index_zero = match &spec.master_pods {
        None => false,
        Some(m) if m.value == "roles" => false,
        Some(m) if m.value == "indexZero" => true,
        Some(m) => {
            return Err(c.err(
                m,
                "spec.masterPods",
                format!(
                    "`{}` is not `roles` (the master roles' pods) or `indexZero` (pod 0 of every role)",
                    m.value
                ),
            ));
        }
    };

    let model = Model {
        name: name.value.clone(),
        group: spec.group.value.clone(),
        version: spec.version.value.clone(),
        kind: kind.clone(),
        plural,
        short_names: spec.short_names.iter().map(|s| s.value.clone()).collect(),
        controller_name: spec
            .controller_name
            .map_or_else(|| format!("{}-controller", kind.to_lowercase()), |s| s.value),
        framework_name: spec
            .framework_name
            .map_or_else(|| name.value.clone(), |s| s.value),
        replica_specs_rust: replica_specs_field.to_snake_case(),
        replica_specs_field,
        container_required: container.required,
        container: container.name.value,
        port,
        roles,
        scale,
        resources,
        env,
        success,
        status,
        master_index_zero,
        hooks: spec.hooks,
        test_job: spec
            .test_job
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect(),
    };
    Ok(Validated { model, warnings })
}

/// The success rules as written, and where: `spec.status.success` or the deprecated
/// `spec.success`.
struct SuccessList<'a> {
    list: &'a S<Vec<S<RawSuccess>>>,
    field: &'static str,
}

/// `spec.container.portName` and `port`: both (a named port added to the container) or neither.
fn validate_port(
    name: Option<&S<String>>,
    port: Option<&S<i64>>,
    c: &Checker<'_>,
) -> Result<Option<(String, i32)>, ManifestError> {
    let (name, port) = match (name, port) {
        (None, None) => return Ok(None),
        (Some(name), Some(port)) => (name, port),
        (Some(name), None) => {
            return Err(c.err(
                name,
                "spec.container.port",
                "portName needs a port number, e.g. `port: 23456`; or remove portName",
            ));
        }
        (None, Some(port)) => {
            return Err(c.err(
                port,
                "spec.container.portName",
                "port needs a name, e.g. `portName: foo-port`; or remove port",
            ));
        }
    };
    if !is_dns_label(&name.value) || name.value.len() > 15 {
        return Err(c.err(
            name,
            "spec.container.portName",
            "must be a DNS label of at most 15 characters (a Kubernetes port name), e.g. `foo-port`",
        ));
    }
    let number = i32::try_from(port.value)
        .ok()
        .filter(|p| (1..=65535).contains(p))
        .ok_or_else(|| {
            c.err(
                port,
                "spec.container.port",
                format!("{} is not a port; use 1-65535", port.value),
            )
        })?;
    Ok(Some((name.value.clone(), number)))
}

/// Checks that a role field names a declared role, returning its canonical name.
type KnownRole<'a> = dyn Fn(&S<String>, &str) -> Result<String, ManifestError> + 'a;

/// The declared roles, for the status rule's role fields and expressions.
struct Roles<'a> {
    names: &'a [&'a str],
    known: &'a KnownRole<'a>,
}

/// `spec.status`: the rule and its fields; success rules (`success`, non-empty) only under
/// `successRules`, and a status hook only with `hooks: true`.
fn validate_status(
    raw: Option<&RawStatus>,
    hooks: bool,
    success: Option<&SuccessList<'_>>,
    roles: Roles<'_>,
    c: &Checker<'_>,
) -> Result<StatusModel, ManifestError> {
    let known_role = roles.known;
    let Some(raw) = raw else {
        return Ok(StatusModel::SuccessRules(RuleWording::default()));
    };
    let rule = raw.rule.as_ref().map_or("successRules", |r| r.value.as_str());
    let only_worded_rules = |field: &str, set: bool| -> Result<(), ManifestError> {
        match (set, &raw.rule) {
            (true, Some(r)) => Err(c.err(
                r,
                &format!("spec.status.{field}"),
                format!("applies to the `successRules` and `cel` rules only, not `{rule}`; remove it"),
            )),
            _ => Ok(()),
        }
    };
    let wording = RuleWording {
        subject: raw.subject.as_ref().map(|s| s.value.clone()),
        exit_code_restart_events: raw.exit_code_restart_events,
    };
    let no_success = |r: &S<String>| -> Result<(), ManifestError> {
        match success {
            None => Ok(()),
            Some(SuccessList {
                field: "spec.success",
                ..
            }) => Err(c.err(
                r,
                "spec.success",
                format!("the `{rule}` status rule decides success itself; remove spec.success or use rule `successRules`"),
            )),
            Some(s) => Err(c.err(
                s.list,
                s.field,
                format!("applies to the `successRules` rule only: the `{rule}` rule decides success itself; remove it or use rule `successRules`"),
            )),
        }
    };
    let Some(r) = raw.rule.as_ref().filter(|r| r.value != "successRules") else {
        only_cel_fields(raw, c)?;
        for (field, given) in [("leader", &raw.leader), ("followers", &raw.followers)] {
            if let Some(g) = given {
                return Err(c.err(
                    g,
                    &format!("spec.status.{field}"),
                    "applies to the `leaderOrFollowers` rule only; set `rule: leaderOrFollowers` or remove it",
                ));
            }
        }
        return Ok(StatusModel::SuccessRules(wording));
    };
    if !matches!(rule, "leaderOrFollowers" | "hook" | "cel") {
        return Err(c.err(
            r,
            "spec.status.rule",
            format!("`{rule}` is not `successRules`, `leaderOrFollowers`, `hook` or `cel`"),
        ));
    }
    no_success(r)?;
    if rule == "cel" {
        for (field, given) in [("leader", &raw.leader), ("followers", &raw.followers)] {
            if let Some(g) = given {
                return Err(c.err(
                    g,
                    &format!("spec.status.{field}"),
                    "applies to the `leaderOrFollowers` rule only, not `cel`; remove it",
                ));
            }
        }
        return validate_cel(raw, r, roles.names, wording, c);
    }
    only_worded_rules("subject", raw.subject.is_some())?;
    only_worded_rules("exitCodeRestartEvents", raw.exit_code_restart_events)?;
    only_cel_fields(raw, c)?;
    if rule == "hook" {
        if !hooks {
            return Err(c.err(
                r,
                "spec.status.rule",
                "`hook` needs `hooks: true` in spec: the rule is `Framework::update_status` in src/hooks.rs",
            ));
        }
        return Ok(StatusModel::Hook);
    }
    let followers = raw.followers.as_ref().ok_or_else(|| {
        c.err(
            r,
            "spec.status.followers",
            "the leaderOrFollowers rule needs the followers' role",
        )
    })?;
    Ok(StatusModel::LeaderOrFollowers {
        leader: raw
            .leader
            .as_ref()
            .map(|l| known_role(l, "spec.status.leader"))
            .transpose()?,
        followers: known_role(followers, "spec.status.followers")?,
    })
}

/// `succeeded`, `running` and `failed` belong to `rule: cel`.
fn only_cel_fields(raw: &RawStatus, c: &Checker<'_>) -> Result<(), ManifestError> {
    for (field, given) in [
        ("succeeded", &raw.succeeded),
        ("running", &raw.running),
        ("failed", &raw.failed),
    ] {
        if let Some(g) = given {
            return Err(c.err(
                g,
                &format!("spec.status.{field}"),
                "applies to the `cel` rule only; set `rule: cel` or remove it",
            ));
        }
    }
    Ok(())
}

/// `rule: cel`: `succeeded` is required, `running` and `failed` optional, and each must compile against the
/// declared roles. A CEL error is reported at the expression, its position within the
/// expression in the message (a quoted or folded scalar moves the text, so the manifest column
/// of a character inside it is not known).
fn validate_cel(
    raw: &RawStatus,
    rule: &S<String>,
    roles: &[&str],
    wording: RuleWording,
    c: &Checker<'_>,
) -> Result<StatusModel, ManifestError> {
    let compile = |expr: &S<String>, field: &str| -> Result<String, ManifestError> {
        crate::cel_rule::CelRule::compile(&expr.value, roles)
            .map(|_| expr.value.clone())
            .map_err(|e| {
                c.err(
                    expr,
                    &format!("spec.status.{field}"),
                    format!("invalid CEL at {e}"),
                )
            })
    };
    let succeeded = raw.succeeded.as_ref().ok_or_else(|| {
        c.err(
            rule,
            "spec.status.succeeded",
            "the cel rule needs `succeeded`, an expression such as `replicas.Worker.succeeded == replicas.Worker.total`",
        )
    })?;
    let succeeded = compile(succeeded, "succeeded")?;
    let running = raw.running.as_ref().map(|r| compile(r, "running")).transpose()?;
    let failed = raw.failed.as_ref().map(|f| compile(f, "failed")).transpose()?;
    Ok(StatusModel::Cel {
        succeeded,
        running,
        failed,
        wording,
    })
}

fn validate_roles(roles: &S<Vec<RawRole>>, c: &Checker<'_>) -> Result<Vec<RoleModel>, ManifestError> {
    if roles.value.is_empty() {
        return Err(c.err(
            roles,
            "spec.roles",
            "declare at least one role, e.g. `- name: Worker`",
        ));
    }
    let mut out: Vec<RoleModel> = Vec::new();
    for (i, r) in roles.value.iter().enumerate() {
        let field = format!("spec.roles[{i}]");
        let name = &r.name.value;
        if !is_upper_camel(name) {
            return Err(c.err(
                &r.name,
                &format!("{field}.name"),
                "must be UpperCamelCase, e.g. `Worker`",
            ));
        }
        if out.iter().any(|o| o.name.eq_ignore_ascii_case(name)) {
            return Err(c.err(
                &r.name,
                &format!("{field}.name"),
                format!("role `{name}` is declared twice"),
            ));
        }
        let restart_policy = match &r.restart_policy {
            None => "Never".to_owned(),
            Some(p) if RESTART_POLICIES.contains(&p.value.as_str()) => p.value.clone(),
            Some(p) => {
                return Err(c.err(
                    p,
                    &format!("{field}.restartPolicy"),
                    format!(
                        "`{}` is not a restart policy; use {}",
                        p.value,
                        RESTART_POLICIES.join(", ")
                    ),
                ));
            }
        };
        for bound in [&r.min_replicas, &r.max_replicas, &r.default_replicas]
            .into_iter()
            .flatten()
        {
            if bound.value < 0 {
                return Err(c.err(bound, &field, "replica counts must be 0 or more"));
            }
        }
        if let (Some(min), Some(max)) = (&r.min_replicas, &r.max_replicas)
            && min.value > max.value
        {
            return Err(c.err(
                min,
                &format!("{field}.minReplicas"),
                format!("minReplicas {} is above maxReplicas {}", min.value, max.value),
            ));
        }
        out.push(RoleModel {
            name: name.clone(),
            master: r.master,
            required: r.required,
            restart_policy,
            min_replicas: r.min_replicas.as_ref().map(|v| v.value),
            max_replicas: r.max_replicas.as_ref().map(|v| v.value),
            default_replicas: r.default_replicas.as_ref().map_or(1, |v| v.value),
        });
    }
    Ok(out)
}

/// The manifest `kfop new` writes when none is given: a master and workers, PyTorch-style env.
pub fn default_manifest(name: &str, group: &str) -> String {
    let kind = format!("{}Job", name.to_upper_camel_case());
    let port_name = format!("{}-port", name[..name.len().min(10)].trim_end_matches('-'));
    format!(
        "apiVersion: {API_VERSION}
kind: {KIND}
metadata:
  name: {name}
spec:
  group: {group}
  version: v1
  kind: {kind}
  shortNames: [{lower}]
  container:
    name: {name}
    portName: {port_name}
    port: 23456
  roles:
    - name: Master
      master: true
      restartPolicy: OnFailure
      minReplicas: 1
      maxReplicas: 1
    - name: Worker
      restartPolicy: OnFailure
  env:
    - name: MASTER_ADDR
      value: \"{{host.Master.0}}\"
      requires: [Master]
    - name: MASTER_PORT
      value: \"{{port.Master}}\"
      requires: [Master]
    - name: WORLD_SIZE
      value: \"{{total_replicas}}\"
    - name: RANK
      value: \"{{rank}}\"
  status:
    rule: successRules
    success:
      - allOf: Master
      - allOf: Worker
",
        lower = kind.to_lowercase(),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A manifest with a `rule: cel` status; `STATUS` is replaced by the status's fields.
    const CEL: &str = "apiVersion: kfop.dev/v1alpha1
kind: Framework
metadata:
  name: foo
spec:
  group: example.com
  version: v1
  kind: FooJob
  container:
    name: foo
  roles:
    - name: Master
    - name: Worker
  status:
    rule: cel
STATUS";

    fn parse_status(status: &str) -> Result<Model, ManifestError> {
        parse(&CEL.replace("STATUS", status), Path::new("kfop.yaml"))
    }

    fn error(status: &str) -> String {
        parse_status(status).unwrap_err().to_string()
    }

    #[test]
    fn cel_rules_are_kept_as_written() {
        let model = parse_status(
            "    succeeded: \"replicas.Worker.succeeded * 2 >= replicas.Worker.total\"\n    failed: replicas.Master.failed > 0\n",
        )
        .unwrap();
        assert_eq!(
            model.status,
            StatusModel::Cel {
                succeeded: "replicas.Worker.succeeded * 2 >= replicas.Worker.total".into(),
                running: None,
                failed: Some("replicas.Master.failed > 0".into()),
                wording: RuleWording::default(),
            }
        );
    }

    #[test]
    fn a_cel_syntax_error_points_at_the_expression() {
        let line = error("    succeeded: \"replicas.Worker.succeeded >= )\"\n");
        assert!(
            line.starts_with(
                "kfop.yaml:16:16: spec.status.succeeded: invalid CEL at 1:30: Syntax error: mismatched input ')'"
            ),
            "{line}"
        );
    }

    #[test]
    fn a_cel_rule_naming_an_undeclared_role_is_refused() {
        assert_eq!(
            error("    succeeded: \"true\"\n    failed: replicas.Chief.failed > 0\n"),
            "kfop.yaml:17:13: spec.status.failed: invalid CEL at 1:9: unknown role `Chief`; declared roles are Master, Worker"
        );
    }

    #[test]
    fn the_cel_rule_needs_succeeded_and_owns_its_fields() {
        assert!(
            error("    failed: \"false\"\n")
                .starts_with("kfop.yaml:15:11: spec.status.succeeded: the cel rule needs `succeeded`"),
        );
        assert!(
            error("    succeeded: \"true\"\n    followers: Worker\n")
                .contains("spec.status.followers: applies to the `leaderOrFollowers` rule only, not `cel`"),
        );
        let text = CEL.replace("    rule: cel\nSTATUS", "    succeeded: \"true\"\n");
        let other = parse(&text, Path::new("kfop.yaml")).unwrap_err().to_string();
        assert!(
            other.contains("spec.status.succeeded: applies to the `cel` rule only"),
            "{other}"
        );
    }

    /// A manifest without a status; `REST` is replaced by the end of its spec.
    const BASE: &str = "apiVersion: kfop.dev/v1alpha1
kind: Framework
metadata:
  name: foo
spec:
  group: example.com
  version: v1
  kind: FooJob
  container:
    name: foo
  roles:
    - name: Master
    - name: Worker
REST";

    fn with_warnings(rest: &str) -> Result<Validated, ManifestError> {
        parse_with_warnings(&BASE.replace("REST", rest), Path::new("kfop.yaml"))
    }

    #[test]
    fn the_deprecated_success_list_loads_as_status_success_with_a_warning() {
        let rules = [
            "    - allOf: Master\n    - anyOf: Worker\n    - indexZeroOf: Worker\n",
            "    []\n",
        ];
        for rules in rules {
            let nested = rules.replace("    ", "      ");
            // (old spelling, new spellings): without and with the status's other fields.
            let cases = [
                (
                    format!("  success:\n{rules}"),
                    vec![
                        format!("  status:\n    success:\n{nested}"),
                        format!("  status:\n    rule: successRules\n    success:\n{nested}"),
                        format!("  status: {{success: {}}}\n", flow(rules)),
                    ],
                ),
                (
                    format!(
                        "  success:\n{rules}  status:\n    subject: foojob\n    exitCodeRestartEvents: true\n"
                    ),
                    vec![format!(
                        "  status:\n    subject: foojob\n    exitCodeRestartEvents: true\n    success:\n{nested}"
                    )],
                ),
                (
                    format!("  status:\n    rule: successRules\n    subject: foojob\n  success:\n{rules}"),
                    vec![format!(
                        "  status:\n    rule: successRules\n    subject: foojob\n    success:\n{nested}"
                    )],
                ),
            ];
            for (old, new) in cases {
                let old = with_warnings(&old).unwrap();
                assert_eq!(old.warnings.len(), 1, "{:?}", old.warnings);
                let warning = &old.warnings[0];
                assert_eq!(warning.field, "spec.success");
                assert!(
                    warning
                        .message
                        .starts_with("deprecated: move this list to spec.status.success"),
                    "{warning}"
                );
                for new in new {
                    let new = with_warnings(&new).unwrap();
                    assert_eq!(new.warnings, []);
                    assert_eq!(new.model, old.model);
                }
            }
        }
        let model = with_warnings("  success:\n    - allOf: Master\n    - anyOf: Worker\n")
            .unwrap()
            .model;
        assert_eq!(
            model.success,
            [
                (SuccessKind::AllOf, "Master".to_owned()),
                (SuccessKind::AnyOf, "Worker".to_owned())
            ]
        );
        assert_eq!(model.status, StatusModel::SuccessRules(RuleWording::default()));
    }

    /// `    - allOf: Master\n    - anyOf: Worker\n` as `[{allOf: Master}, {anyOf: Worker}]`.
    fn flow(block: &str) -> String {
        if block.trim() == "[]" {
            return "[]".to_owned();
        }
        let items: Vec<String> = block
            .lines()
            .map(|l| format!("{{{}}}", l.trim().trim_start_matches("- ")))
            .collect();
        format!("[{}]", items.join(", "))
    }

    #[test]
    fn the_deprecated_warning_is_one_line_at_the_list() {
        let warning = &with_warnings("  success:\n    - allOf: Worker\n")
            .unwrap()
            .warnings[0];
        assert_eq!(
            warning.to_string(),
            "kfop.yaml:15:5: spec.success: deprecated: move this list to spec.status.success \
             (the same entries, indented under `status:`); it is read as that"
        );
    }

    #[test]
    fn status_success_is_checked_where_it_is() {
        let err = |rest: &str| with_warnings(rest).unwrap_err().to_string();
        assert_eq!(
            err("  success:\n    - allOf: Master\n  status:\n    success:\n      - allOf: Worker\n"),
            "kfop.yaml:15:5: spec.success: the success rules are given twice, here and in \
             spec.status.success; remove spec.success (deprecated)"
        );
        assert_eq!(
            err("  status:\n    success:\n      - allOf: Boss\n"),
            "kfop.yaml:16:16: spec.status.success[0].allOf: unknown role `Boss`; declared roles are Master, Worker"
        );
        assert_eq!(
            err("  status:\n    success:\n      - allOf: Master\n        anyOf: Worker\n"),
            "kfop.yaml:16:9: spec.status.success[0]: give exactly one of allOf, anyOf or indexZeroOf, e.g. `- allOf: Worker`"
        );
        assert_eq!(
            err("  success:\n    - {}\n"),
            "kfop.yaml:15:7: spec.success[0]: give exactly one of allOf, anyOf or indexZeroOf, e.g. `- allOf: Worker`"
        );
        assert_eq!(
            err(
                "  status:\n    rule: leaderOrFollowers\n    followers: Worker\n    success:\n      - allOf: Worker\n"
            ),
            "kfop.yaml:18:7: spec.status.success: applies to the `successRules` rule only: the \
             `leaderOrFollowers` rule decides success itself; remove it or use rule `successRules`"
        );
        // The old spelling keeps its old error.
        assert_eq!(
            err("  status:\n    rule: cel\n    succeeded: \"true\"\n  success:\n    - allOf: Worker\n"),
            "kfop.yaml:15:11: spec.success: the `cel` status rule decides success itself; remove \
             spec.success or use rule `successRules`"
        );
        // An empty list says nothing, under any rule.
        let cel =
            with_warnings("  status:\n    rule: cel\n    succeeded: \"true\"\n    success: []\n").unwrap();
        assert!(matches!(cel.model.status, StatusModel::Cel { .. }));
        assert_eq!(cel.warnings, []);
    }

    #[test]
    fn the_scaffold_is_in_the_current_spelling() {
        let scaffold = parse_with_warnings(
            &default_manifest("foo", "foo.example.com"),
            Path::new("kfop.yaml"),
        )
        .unwrap();
        assert_eq!(scaffold.warnings, []);
        assert_eq!(
            scaffold.model.success,
            [
                (SuccessKind::AllOf, "Master".to_owned()),
                (SuccessKind::AllOf, "Worker".to_owned())
            ]
        );
        assert_eq!(
            scaffold.model.status,
            StatusModel::SuccessRules(RuleWording::default())
        );
    }
}
