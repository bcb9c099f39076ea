//! The `#[training_job(...)]` arguments: parsed by darling (which reports unknown keys with a
//! "did you mean" hint), then checked into a [`Job`] whose every value is known to be usable.
use darling::FromMeta;
use darling::ast::NestedMeta;
use darling::util::{Flag, SpannedValue};
use proc_macro2::TokenStream;

/// The attribute as written.
#[derive(Debug, FromMeta)]
struct JobArgs {
    group: Option<SpannedValue<String>>,
    version: Option<SpannedValue<String>>,
    kind: Option<SpannedValue<String>>,
    plural: Option<String>,
    #[darling(multiple, rename = "shortname")]
    shortnames: Vec<String>,
    #[darling(multiple, rename = "category")]
    categories: Vec<String>,
    controller: Option<String>,
    framework: Option<String>,
    container: Option<String>,
    /// Every replica must run the container named `container` (Kubeflow's v1 webhooks).
    container_required: Flag,
    port_name: Option<String>,
    port: Option<SpannedValue<i64>>,
    scale: Option<SpannedValue<String>>,
    /// The restart policy of roles that do not name their own.
    restart_policy: Option<SpannedValue<String>>,
    #[darling(multiple, rename = "role")]
    roles: Vec<SpannedValue<RoleArgs>>,
}

#[derive(Debug, FromMeta)]
struct RoleArgs {
    name: SpannedValue<String>,
    master: Flag,
    required: Flag,
    restart_policy: Option<SpannedValue<String>>,
    default_replicas: Option<SpannedValue<i32>>,
    min_replicas: Option<SpannedValue<i32>>,
    max_replicas: Option<SpannedValue<i32>>,
}

/// A checked job declaration.
#[derive(Debug)]
pub struct Job {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub shortnames: Vec<String>,
    pub categories: Vec<String>,
    pub controller: String,
    pub framework: String,
    pub container: String,
    pub container_required: bool,
    /// The default port's name and number, if the framework has one.
    pub port: Option<(String, i32)>,
    /// The role whose replica count the scale subresource exposes.
    pub scale: Option<String>,
    pub roles: Vec<Role>,
}

#[derive(Debug)]
pub struct Role {
    /// Canonical CamelCase name, also the replica-type enum variant.
    pub name: String,
    pub restart_policy: RestartPolicy,
    pub master: bool,
    /// Every job must have this role.
    pub required: bool,
    pub default_replicas: Option<i32>,
    pub min_replicas: Option<i32>,
    pub max_replicas: Option<i32>,
}

/// `kfop_runtime::api::RestartPolicy`, known at expansion time.
#[derive(Clone, Copy, Debug)]
pub enum RestartPolicy {
    Always,
    OnFailure,
    Never,
    ExitCode,
}

impl RestartPolicy {
    const ALL: [Self; 4] = [Self::Always, Self::OnFailure, Self::Never, Self::ExitCode];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Always => "Always",
            Self::OnFailure => "OnFailure",
            Self::Never => "Never",
            Self::ExitCode => "ExitCode",
        }
    }

    fn parse(value: &SpannedValue<String>) -> darling::Result<Self> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == value.as_str())
            .ok_or_else(|| {
                let hint = Self::ALL
                    .into_iter()
                    .find(|p| p.as_str().eq_ignore_ascii_case(value))
                    .map_or_else(String::new, |p| format!(" (did you mean `{}`?)", p.as_str()));
                darling::Error::custom(format!(
                    "unknown restart_policy `{}`{hint}; use one of Always, OnFailure, Never, ExitCode",
                    value.as_str()
                ))
                .with_span(&value.span())
            })
    }
}

/// Parses and checks the attribute arguments; every problem found is reported at once.
pub fn parse(attr: TokenStream) -> darling::Result<Job> {
    let items = NestedMeta::parse_meta_list(attr)?;
    let args = JobArgs::from_list(&items)?;
    check(args)
}

/// `value`, or an error naming the missing `key` and an example of it.
fn required<T>(
    errors: &mut darling::error::Accumulator,
    value: Option<T>,
    key: &str,
    example: &str,
) -> Option<T> {
    if value.is_none() {
        errors.push(darling::Error::custom(format!(
            "#[training_job] is missing `{key}`: add {example}"
        )));
    }
    value
}

fn check(args: JobArgs) -> darling::Result<Job> {
    let mut errors = darling::Error::accumulator();
    let group = required(
        &mut errors,
        args.group,
        "group",
        "the API group, e.g. group = \"kubeflow.org\"",
    );
    let version = required(
        &mut errors,
        args.version,
        "version",
        "the API version, e.g. version = \"v1\"",
    );
    let kind = required(
        &mut errors,
        args.kind,
        "kind",
        "the resource kind, e.g. kind = \"PyTorchJob\"",
    );
    let controller = required(
        &mut errors,
        args.controller,
        "controller",
        "the controller name, e.g. controller = \"pytorchjob-controller\"",
    );
    let framework = required(
        &mut errors,
        args.framework,
        "framework",
        "the framework label, e.g. framework = \"pytorch\"",
    );
    let container = required(
        &mut errors,
        args.container,
        "container",
        "the default container, e.g. container = \"pytorch\"",
    );
    // The default port is optional, but a name without a number (or the reverse) is a mistake.
    let (port_name, port) = match (args.port_name, args.port) {
        (Some(name), None) => {
            errors.push(darling::Error::custom(format!(
                "#[training_job] has `port_name = \"{name}\"` but no `port`: add the port, e.g. port = 23456, or remove port_name"
            )));
            (None, None)
        }
        (None, Some(port)) => {
            errors.push(
                darling::Error::custom(
                    "`port` needs `port_name`: add the port's name, e.g. port_name = \"pytorchjob-port\", or remove port",
                )
                .with_span(&port.span()),
            );
            (None, None)
        }
        pair => pair,
    };

    if let Some(group) = &group
        && !group.contains('.')
    {
        errors.push(
            darling::Error::custom(format!(
                "group `{}` must be a domain with a dot, e.g. \"kubeflow.org\" (the API server requires it)",
                group.as_str()
            ))
            .with_span(&group.span()),
        );
    }
    if let Some(kind) = &kind
        && !is_camel_ident(kind)
    {
        errors.push(
            darling::Error::custom(format!(
                "kind `{}` must be a CamelCase identifier such as \"PyTorchJob\": it names the generated type",
                kind.as_str()
            ))
            .with_span(&kind.span()),
        );
    }
    let port = port.and_then(|p| match i32::try_from(*p) {
        Ok(n) if (1..=65535).contains(&n) => Some(n),
        _ => {
            errors.push(
                darling::Error::custom(format!("port {} is out of range; use a port in 1..=65535", *p))
                    .with_span(&p.span()),
            );
            None
        }
    });
    let default_policy = args
        .restart_policy
        .as_ref()
        .and_then(|p| errors.handle(RestartPolicy::parse(p)));
    let roles = check_roles(
        &mut errors,
        args.roles,
        default_policy,
        args.restart_policy.is_some(),
    );

    if let Some(scale) = &args.scale
        && !roles.iter().any(|r| r.name == **scale)
    {
        errors.push(
            darling::Error::custom(format!(
                "scale names `{}`, which is not a declared role; use one of {}",
                scale.as_str(),
                role_list(&roles)
            ))
            .with_span(&scale.span()),
        );
    }

    errors.finish()?;
    // Every required value is present here: `finish` has reported any missing one.
    let kind = kind.unwrap_or_default().into_inner();
    Ok(Job {
        group: group.unwrap_or_default().into_inner(),
        version: version.unwrap_or_default().into_inner(),
        plural: args
            .plural
            .unwrap_or_else(|| format!("{}s", kind.to_ascii_lowercase())),
        shortnames: args.shortnames,
        categories: if args.categories.is_empty() {
            kfop_crd_rules::DEFAULT_CATEGORIES.map(str::to_owned).to_vec()
        } else {
            args.categories
        },
        kind,
        controller: controller.unwrap_or_default(),
        framework: framework.unwrap_or_default(),
        container: container.unwrap_or_default(),
        container_required: args.container_required.is_present(),
        port: port_name.zip(port),
        scale: args.scale.map(SpannedValue::into_inner),
        roles,
    })
}

fn check_roles(
    errors: &mut darling::error::Accumulator,
    args: Vec<SpannedValue<RoleArgs>>,
    default_policy: Option<RestartPolicy>,
    default_given: bool,
) -> Vec<Role> {
    if args.is_empty() {
        errors.push(darling::Error::custom(
            "#[training_job] declares no roles: add at least one role(name = \"Worker\", restart_policy = \"OnFailure\")",
        ));
    }
    let mut roles: Vec<Role> = Vec::new();
    for arg in args {
        let span = arg.span();
        let arg = arg.into_inner();
        if !is_camel_ident(&arg.name) {
            errors.push(
                darling::Error::custom(format!(
                    "role name `{}` must be a CamelCase identifier like Kubeflow's replica types (e.g. \"Worker\", \"PS\")",
                    arg.name.as_str()
                ))
                .with_span(&arg.name.span()),
            );
        }
        if let Some(first) = roles.iter().find(|r| r.name.eq_ignore_ascii_case(&arg.name)) {
            // Replica-type keys are matched case-insensitively, so `PS` and `Ps` clash.
            errors.push(
                darling::Error::custom(format!(
                    "duplicate role `{}`: it matches `{}` (replica types match in any letter case); declare each role once",
                    arg.name.as_str(),
                    first.name
                ))
                .with_span(&arg.name.span()),
            );
        }
        let restart_policy = match &arg.restart_policy {
            Some(p) => errors.handle(RestartPolicy::parse(p)),
            // An invalid attribute-level default is reported once, above.
            None if default_given => default_policy,
            None => {
                errors.push(
                    darling::Error::custom(format!(
                        "role `{}` has no restart policy: add restart_policy = \"OnFailure\" (or Always, Never, ExitCode) to the role, or one for all roles to #[training_job]",
                        arg.name.as_str()
                    ))
                    .with_span(&span),
                );
                None
            }
        };
        check_replicas(errors, &arg);
        roles.push(Role {
            name: arg.name.as_str().to_owned(),
            // A placeholder after an error: expansion stops before it is used.
            restart_policy: restart_policy.unwrap_or(RestartPolicy::Never),
            master: arg.master.is_present(),
            required: arg.required.is_present(),
            default_replicas: arg.default_replicas.map(SpannedValue::into_inner),
            min_replicas: arg.min_replicas.map(SpannedValue::into_inner),
            max_replicas: arg.max_replicas.map(SpannedValue::into_inner),
        });
    }
    roles
}

/// Replica bounds must be non-negative and ordered, and the default must lie within them.
fn check_replicas(errors: &mut darling::error::Accumulator, role: &RoleArgs) {
    let name = role.name.as_str();
    for value in [&role.default_replicas, &role.min_replicas, &role.max_replicas]
        .into_iter()
        .flatten()
    {
        if **value < 0 {
            errors.push(
                darling::Error::custom(format!(
                    "role `{name}`: replica counts cannot be negative; use 0 or more"
                ))
                .with_span(&value.span()),
            );
        }
    }
    if let (Some(min), Some(max)) = (&role.min_replicas, &role.max_replicas)
        && **min > **max
    {
        errors.push(
            darling::Error::custom(format!(
                "role `{name}`: min_replicas {} is above max_replicas {}; swap them",
                **min, **max
            ))
            .with_span(&min.span()),
        );
        // No default can lie within reversed bounds; one error is enough.
        return;
    }
    // Kubeflow's default replica count is 1.
    let default = role.default_replicas.as_ref().map_or(1, |d| **d);
    let below = role.min_replicas.as_ref().filter(|min| default < ***min);
    let above = role.max_replicas.as_ref().filter(|max| default > ***max);
    if let Some(bound) = below.or(above) {
        errors.push(
            darling::Error::custom(format!(
                "role `{name}`: the default replica count {default} is outside min_replicas..=max_replicas; set default_replicas within the bounds"
            ))
            .with_span(&bound.span()),
        );
    }
}

pub fn role_list(roles: &[Role]) -> String {
    roles
        .iter()
        .map(|r| r.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// An ASCII identifier starting with an upper-case letter: usable as a type or variant name.
fn is_camel_ident(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase()) && chars.all(|c| c.is_ascii_alphanumeric())
}
