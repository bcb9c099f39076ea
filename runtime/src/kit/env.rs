//! Environment injection declared as data: `{variable}` templates over the job, the pod's role
//! and index, replica counts, ports and peer addresses. Manifests compile to these, so a simple
//! framework needs no hand-written pod decoration.
//!
//! Variables (role names are the canonical CamelCase ones):
//!
//! | variable | value |
//! |---|---|
//! | `job`, `namespace` | the job's name and namespace |
//! | `role`, `role_lower`, `index` | this pod's replica type and index |
//! | `rank` | index plus the replicas of every role before this one (framework role order) |
//! | `total_replicas` | replicas summed over the job's roles |
//! | `replicas.<Role>` | replicas of a role (0 if absent) |
//! | `port.<Role>` | the framework port of a role's default container |
//! | `host.<Role>.<i>` | `<job>-<role>-<i>`, the headless service of replica i |
//! | `fqdn.<Role>.<i>` | `<job>-<role>-<i>.<namespace>.svc` |
//! | `hosts.<Role>` | `host.<Role>.0,...` over all replicas of the role |
//!
//! `{{` and `}}` stand for literal braces.
use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, PodTemplateSpec};

use crate::api::ReplicaSpec;
use crate::info::FrameworkInfo;
use crate::labels::child_name;

/// A parsed `{variable}` template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Var(Var),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Var {
    Job,
    Namespace,
    Role,
    RoleLower,
    Index,
    Rank,
    TotalReplicas,
    Replicas(String),
    Port(String),
    Host(String, i32),
    Fqdn(String, i32),
    Hosts(String),
}

/// A template that does not parse, with the byte offset of the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} at character {offset} of {template:?}")]
pub struct TemplateError {
    pub template: String,
    pub offset: usize,
    pub message: String,
}

/// A variable that has no value for this job (e.g. the port of a role without that port).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RenderError(pub String);

impl Template {
    /// Whether the template reads a role's port (`{port.<Role>}`), which needs a framework port.
    pub fn uses_port(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, Part::Var(Var::Port(_))))
    }

    /// Parses `text`. `roles` are the framework's role names: a variable naming another role is
    /// an error here, at generation time, not when a pod is built.
    pub fn parse(text: &str, roles: &[&str]) -> Result<Self, TemplateError> {
        let err = |offset: usize, message: String| TemplateError {
            template: text.to_owned(),
            offset,
            message,
        };
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut chars = text.char_indices().peekable();
        while let Some((at, c)) = chars.next() {
            match c {
                '{' if chars.peek().is_some_and(|(_, n)| *n == '{') => {
                    chars.next();
                    literal.push('{');
                }
                '}' if chars.peek().is_some_and(|(_, n)| *n == '}') => {
                    chars.next();
                    literal.push('}');
                }
                '}' => return Err(err(at, "unmatched `}` (write `}}` for a literal brace)".into())),
                '{' => {
                    let mut name = String::new();
                    loop {
                        match chars.next() {
                            Some((_, '}')) => break,
                            Some((_, c)) => name.push(c),
                            None => {
                                return Err(err(at, "unclosed `{` (write `{{` for a literal brace)".into()));
                            }
                        }
                    }
                    let var = Var::parse(name.trim(), roles).map_err(|m| err(at, m))?;
                    if !literal.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut literal)));
                    }
                    parts.push(Part::Var(var));
                }
                c => literal.push(c),
            }
        }
        if !literal.is_empty() {
            parts.push(Part::Text(literal));
        }
        Ok(Self { parts })
    }

    pub fn render(&self, ctx: &EnvContext<'_>) -> Result<String, RenderError> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Var(v) => out.push_str(&ctx.value(v)?),
            }
        }
        Ok(out)
    }
}

impl Var {
    fn parse(name: &str, roles: &[&str]) -> Result<Self, String> {
        let role = |r: &str| -> Result<String, String> {
            roles
                .iter()
                .find(|known| known.eq_ignore_ascii_case(r))
                .map(|known| (*known).to_owned())
                .ok_or_else(|| {
                    format!(
                        "unknown role `{r}` in `{{{name}}}`; roles are {}",
                        roles.join(", ")
                    )
                })
        };
        let index = |i: &str| -> Result<i32, String> {
            i.parse()
                .ok()
                .filter(|i| *i >= 0)
                .ok_or_else(|| format!("`{i}` in `{{{name}}}` is not a replica index"))
        };
        let segments: Vec<&str> = name.split('.').collect();
        Ok(match segments.as_slice() {
            ["job"] => Self::Job,
            ["namespace"] => Self::Namespace,
            ["role"] => Self::Role,
            ["role_lower"] => Self::RoleLower,
            ["index"] => Self::Index,
            ["rank"] => Self::Rank,
            ["total_replicas"] => Self::TotalReplicas,
            ["replicas", r] => Self::Replicas(role(r)?),
            ["port", r] => Self::Port(role(r)?),
            ["hosts", r] => Self::Hosts(role(r)?),
            ["host", r, i] => Self::Host(role(r)?, index(i)?),
            ["fqdn", r, i] => Self::Fqdn(role(r)?, index(i)?),
            _ => {
                return Err(format!(
                    "unknown variable `{{{name}}}`; use job, namespace, role, role_lower, index, rank, \
                     total_replicas, replicas.<Role>, port.<Role>, host.<Role>.<i>, fqdn.<Role>.<i> or hosts.<Role>"
                ));
            }
        })
    }
}

/// What a template is rendered against: one pod of one job.
#[derive(Debug, Clone, Copy)]
pub struct EnvContext<'a> {
    pub info: &'a FrameworkInfo,
    pub job: &'a str,
    pub namespace: &'a str,
    /// Defaulted replica specs by canonical role name.
    pub specs: &'a BTreeMap<String, ReplicaSpec>,
    pub role: &'a str,
    pub index: i32,
}

impl EnvContext<'_> {
    fn replicas(&self, role: &str) -> i32 {
        self.specs.get(role).map_or(0, ReplicaSpec::replicas)
    }

    fn value(&self, var: &Var) -> Result<String, RenderError> {
        Ok(match var {
            Var::Job => self.job.to_owned(),
            Var::Namespace => self.namespace.to_owned(),
            Var::Role => self.role.to_owned(),
            Var::RoleLower => self.role.to_lowercase(),
            Var::Index => self.index.to_string(),
            Var::Rank => self.rank().to_string(),
            // i64, as in `rank`: replicas may sum past i32::MAX (admission only rejects negative
            // counts), and an i32 sum panicked in debug builds.
            Var::TotalReplicas => self
                .specs
                .values()
                .map(|s| i64::from(s.replicas()))
                .sum::<i64>()
                .to_string(),
            Var::Replicas(r) => self.replicas(r).to_string(),
            Var::Port(r) => self.port(r)?.to_string(),
            Var::Host(r, i) => child_name(self.job, r, *i),
            Var::Fqdn(r, i) => format!("{}.{}.svc", child_name(self.job, r, *i), self.namespace),
            Var::Hosts(r) => (0..self.replicas(r))
                .map(|i| child_name(self.job, r, i))
                .collect::<Vec<_>>()
                .join(","),
        })
    }

    /// Index plus the replicas of the roles before this one in the framework's role order; an
    /// i64, since that sum may pass i32::MAX.
    pub fn rank(&self) -> i64 {
        let before: i64 = self
            .info
            .roles
            .iter()
            .take_while(|r| r.name != self.role)
            .map(|r| i64::from(self.replicas(&r.name)))
            .sum();
        before + i64::from(self.index)
    }

    /// The container port named like the framework's port on the role's default container
    /// (else its first container), or the framework default.
    pub fn port(&self, role: &str) -> Result<i32, RenderError> {
        let spec = self.specs.get(role).ok_or_else(|| {
            RenderError(format!(
                "the job has no {role} replicas, so {role}'s port is unknown"
            ))
        })?;
        let containers = spec
            .template
            .spec
            .as_ref()
            .map(|s| s.containers.as_slice())
            .unwrap_or_default();
        let container = containers.get(
            self.info
                .default_container_index(containers.iter().map(|c| c.name.as_str())),
        );
        let default = self.info.default_port.as_ref().ok_or_else(|| {
            RenderError(format!(
                "the framework declares no port (its manifest's container.port), so {role}'s port is unknown"
            ))
        })?;
        Ok(container
            .and_then(|c| c.ports.as_ref())
            .and_then(|ports| ports.iter().find(|p| p.name.as_deref() == Some(&default.name)))
            .map_or(default.number, |p| p.container_port))
    }
}

/// Where an injected variable's value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvValue {
    Template(Template),
    /// A downward-API field such as `status.podIP`.
    FieldRef(String),
}

/// One declared environment variable and where it applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvSpec {
    pub name: String,
    pub value: EnvValue,
    /// Only pods of these roles (all when empty).
    pub roles: Vec<String>,
    /// Only when the job has all of these roles.
    pub requires: Vec<String>,
    /// Only when the job has none of these roles.
    pub unless: Vec<String>,
    /// Only the pod with this index.
    pub index: Option<i32>,
    /// Every container (true) or only the framework's default container.
    pub all_containers: bool,
}

impl EnvSpec {
    fn applies(&self, ctx: &EnvContext<'_>) -> bool {
        (self.roles.is_empty() || self.roles.iter().any(|r| r == ctx.role))
            && self.requires.iter().all(|r| ctx.specs.contains_key(r))
            && !self.unless.iter().any(|r| ctx.specs.contains_key(r))
            && self.index.is_none_or(|i| i == ctx.index)
    }
}

impl fmt::Display for EnvSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "env {}", self.name)
    }
}

/// Appends every applicable variable to the pod's containers, in declaration order. A variable
/// the template already sets is left as the user wrote it.
pub fn inject(
    specs: &[EnvSpec],
    ctx: &EnvContext<'_>,
    template: &mut PodTemplateSpec,
) -> Result<(), RenderError> {
    let mut vars = Vec::new();
    for spec in specs.iter().filter(|s| s.applies(ctx)) {
        let var = match &spec.value {
            EnvValue::Template(t) => EnvVar {
                name: spec.name.clone(),
                value: Some(t.render(ctx).map_err(|e| RenderError(format!("{spec}: {e}")))?),
                value_from: None,
            },
            EnvValue::FieldRef(path) => EnvVar {
                name: spec.name.clone(),
                value: None,
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        field_path: path.clone(),
                        api_version: None,
                    }),
                    ..EnvVarSource::default()
                }),
            },
        };
        vars.push((var, spec.all_containers));
    }
    let Some(pod) = template.spec.as_mut() else {
        return Ok(());
    };
    let default = ctx
        .info
        .default_container_index(pod.containers.iter().map(|c| c.name.as_str()));
    for (i, container) in pod.containers.iter_mut().enumerate() {
        let env = container.env.get_or_insert_with(Vec::new);
        for (var, all) in &vars {
            if (*all || i == default) && !env.iter().any(|e| e.name == var.name) {
                env.push(var.clone());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::RestartPolicy;
    use crate::info::{FrameworkPort, Role};

    const ROLES: [&str; 2] = ["Master", "Worker"];

    fn info() -> FrameworkInfo {
        FrameworkInfo {
            controller_name: "pytorchjob-controller".into(),
            framework_name: "pytorch".into(),
            default_container: "pytorch".into(),
            default_port: Some(FrameworkPort::new("pytorchjob-port", 23456)),
            roles: vec![
                Role::new("Master", RestartPolicy::OnFailure).master(),
                Role::new("Worker", RestartPolicy::OnFailure),
            ],
        }
    }

    fn specs(master: i32, workers: i32) -> BTreeMap<String, ReplicaSpec> {
        let spec = |n: i32, port: i32| -> ReplicaSpec {
            serde_json::from_value(serde_json::json!({"replicas": n, "template": {"spec": {"containers": [
                {"name": "pytorch", "image": "x", "ports": [{"name": "pytorchjob-port", "containerPort": port}]},
                {"name": "sidecar", "image": "y"}]}}}))
            .unwrap()
        };
        let mut m = BTreeMap::from([("Worker".to_owned(), spec(workers, 23456))]);
        if master > 0 {
            m.insert("Master".to_owned(), spec(master, 8080));
        }
        m
    }

    fn render(t: &str, specs: &BTreeMap<String, ReplicaSpec>, role: &str, index: i32) -> String {
        let info = info();
        let ctx = EnvContext {
            info: &info,
            job: "pj",
            namespace: "ns",
            specs,
            role,
            index,
        };
        Template::parse(t, &ROLES).unwrap().render(&ctx).unwrap()
    }

    #[test]
    fn variables_render() {
        let s = specs(1, 3);
        assert_eq!(
            render("{host.Master.0}:{port.Master}", &s, "Worker", 1),
            "pj-master-0:8080"
        );
        assert_eq!(render("{rank}/{total_replicas}", &s, "Worker", 1), "2/4");
        assert_eq!(render("{rank}", &s, "Master", 0), "0");
        assert_eq!(
            render("{hosts.Worker}", &s, "Master", 0),
            "pj-worker-0,pj-worker-1,pj-worker-2"
        );
        assert_eq!(render("{fqdn.worker.2}", &s, "Master", 0), "pj-worker-2.ns.svc");
        assert_eq!(
            render(
                "{{literal}} {role_lower}-{index} {job}.{namespace}",
                &s,
                "Worker",
                2
            ),
            "{literal} worker-2 pj.ns"
        );
        assert_eq!(
            render("{replicas.Master}+{replicas.Worker}", &specs(0, 2), "Worker", 0),
            "0+2"
        );
    }

    #[test]
    fn bad_templates_name_the_problem() {
        let e = Template::parse("{nope}", &ROLES).unwrap_err();
        assert!(e.message.starts_with("unknown variable `{nope}`"), "{e}");
        let e = Template::parse("x{port.Chief}", &ROLES).unwrap_err();
        assert_eq!(e.offset, 1);
        assert!(e.message.contains("unknown role `Chief`"), "{e}");
        assert!(
            Template::parse("{host.Worker.x}", &ROLES)
                .unwrap_err()
                .message
                .contains("not a replica index")
        );
        assert!(
            Template::parse("{job", &ROLES)
                .unwrap_err()
                .message
                .contains("unclosed")
        );
        assert!(
            Template::parse("job}", &ROLES)
                .unwrap_err()
                .message
                .contains("unmatched")
        );
    }

    #[test]
    fn inject_follows_roles_requirements_and_containers() {
        let info = info();
        let env = |name: &str, value: &str| EnvSpec {
            name: name.into(),
            value: EnvValue::Template(Template::parse(value, &ROLES).unwrap()),
            roles: vec![],
            requires: vec![],
            unless: vec![],
            index: None,
            all_containers: true,
        };
        let specs_list = vec![
            EnvSpec {
                requires: vec!["Master".into()],
                ..env("MASTER_ADDR", "{host.Master.0}")
            },
            EnvSpec {
                all_containers: false,
                ..env("RANK", "{rank}")
            },
            EnvSpec {
                index: Some(0),
                roles: vec!["Worker".into()],
                ..env("FIRST", "yes")
            },
            EnvSpec {
                value: EnvValue::FieldRef("status.podIP".into()),
                unless: vec!["Master".into()],
                ..env("POD_IP", "")
            },
        ];
        let s = specs(1, 2);
        let mut t = s["Worker"].template.clone();
        let ctx = EnvContext {
            info: &info,
            job: "pj",
            namespace: "ns",
            specs: &s,
            role: "Worker",
            index: 0,
        };
        inject(&specs_list, &ctx, &mut t).unwrap();
        let containers = &t.spec.as_ref().unwrap().containers;
        let names = |i: usize| {
            containers[i]
                .env
                .as_ref()
                .unwrap()
                .iter()
                .map(|e| e.name.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(0), ["MASTER_ADDR", "RANK", "FIRST"]);
        assert_eq!(names(1), ["MASTER_ADDR", "FIRST"]);
        assert_eq!(containers[0].env.as_ref().unwrap()[1].value.as_deref(), Some("1"));

        let s = specs(0, 2);
        let mut t = s["Worker"].template.clone();
        let ctx = EnvContext {
            info: &info,
            job: "pj",
            namespace: "ns",
            specs: &s,
            role: "Worker",
            index: 1,
        };
        inject(&specs_list, &ctx, &mut t).unwrap();
        let env = t.spec.unwrap().containers[0].env.clone().unwrap();
        assert_eq!(
            env.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
            ["RANK", "POD_IP"]
        );
        assert_eq!(
            env[1]
                .value_from
                .as_ref()
                .unwrap()
                .field_ref
                .as_ref()
                .unwrap()
                .field_path,
            "status.podIP"
        );
    }

    #[test]
    fn user_set_variables_win_and_missing_roles_fail_to_render() {
        let info = info();
        let s = specs(0, 1);
        let mut t = s["Worker"].template.clone();
        t.spec.as_mut().unwrap().containers[0].env = Some(vec![EnvVar {
            name: "RANK".into(),
            value: Some("7".into()),
            value_from: None,
        }]);
        let rank = EnvSpec {
            name: "RANK".into(),
            value: EnvValue::Template(Template::parse("{rank}", &ROLES).unwrap()),
            roles: vec![],
            requires: vec![],
            unless: vec![],
            index: None,
            all_containers: true,
        };
        let ctx = EnvContext {
            info: &info,
            job: "pj",
            namespace: "ns",
            specs: &s,
            role: "Worker",
            index: 0,
        };
        inject(std::slice::from_ref(&rank), &ctx, &mut t).unwrap();
        assert_eq!(
            t.spec.as_ref().unwrap().containers[0].env.as_ref().unwrap()[0]
                .value
                .as_deref(),
            Some("7")
        );

        let port = EnvSpec {
            value: EnvValue::Template(Template::parse("{port.Master}", &ROLES).unwrap()),
            ..rank
        };
        let err = inject(&[port], &ctx, &mut t).unwrap_err();
        assert!(err.0.contains("no Master replicas"), "{err}");
    }

    mod properties {
        use proptest::collection::vec;
        use proptest::prelude::*;

        use super::*;

        /// The variables that take no role or index.
        const SIMPLE: [&str; 7] = [
            "job",
            "namespace",
            "role",
            "role_lower",
            "index",
            "rank",
            "total_replicas",
        ];

        /// Pieces of the syntax: braces, variable names and separators, role names in any case,
        /// indices at and past the i32 limits.
        fn token() -> impl Strategy<Value = String> {
            let mut pieces = vec![
                "{",
                "}",
                "{{",
                "}}",
                ".",
                " ",
                "replicas",
                "port",
                "host",
                "fqdn",
                "hosts",
                "Master",
                "Worker",
                "worker",
                "MASTER",
                "Chief",
                "0",
                "7",
                "-1",
                "+1",
                "2147483647",
                "2147483648",
                "é",
                "\n",
            ];
            pieces.extend(SIMPLE);
            proptest::sample::select(pieces).prop_map(str::to_owned)
        }

        /// A placeholder that parses against [`ROLES`] (roles written in any case, spaces inside
        /// the braces).
        fn placeholder() -> impl Strategy<Value = String> {
            let role = prop_oneof![Just("Master"), Just("Worker"), Just("worker"), Just("MASTER")];
            let simple = proptest::sample::select(SIMPLE.to_vec()).prop_map(str::to_owned);
            let of_role = (
                proptest::sample::select(vec!["replicas", "port", "hosts"]),
                role.clone(),
            )
                .prop_map(|(v, r)| format!("{v}.{r}"));
            let of_replica = (
                prop_oneof![Just("host"), Just("fqdn")],
                role,
                prop_oneof![0..4i32, Just(i32::MAX)],
            )
                .prop_map(|(v, r, i)| format!("{v}.{r}.{i}"));
            (prop_oneof![simple, of_role, of_replica], any::<bool>()).prop_map(|(v, pad)| {
                if pad {
                    format!("{{ {v} }}")
                } else {
                    format!("{{{v}}}")
                }
            })
        }

        /// Mostly templates that parse, with literal text, stray tokens and arbitrary text between.
        fn template() -> impl Strategy<Value = String> {
            let piece = prop_oneof![
                4 => placeholder(),
                2 => "[a-z:,/ -]{0,4}",
                1 => token(),
                1 => any::<String>(),
            ];
            vec(piece, 0..8).prop_map(|pieces| pieces.concat())
        }

        /// A replica spec with `replicas`, whose pod has the framework's port, another port, no
        /// containers or no spec at all.
        fn replica_spec(replicas: impl Strategy<Value = Option<i32>>) -> impl Strategy<Value = ReplicaSpec> {
            let pod = prop_oneof![
                (1..65536i32).prop_map(|port| serde_json::json!({"containers": [
                    {"name": "sidecar", "image": "y"},
                    {"name": "pytorch", "image": "x", "ports": [{"name": "pytorchjob-port", "containerPort": port}]}]})),
                Just(serde_json::json!({"containers": [{"name": "other", "image": "x", "ports": [{"name": "p", "containerPort": 1}]}]})),
                Just(serde_json::json!({"containers": []})),
                Just(serde_json::Value::Null),
            ];
            (replicas, pod).prop_map(|(replicas, pod)| ReplicaSpec {
                replicas,
                template: serde_json::from_value(serde_json::json!({ "spec": pod })).unwrap(),
                restart_policy: None,
            })
        }

        /// Specs with each of [`ROLES`] present or absent (as after defaulting, keys canonical).
        fn specs(
            replicas: impl Strategy<Value = Option<i32>> + Clone,
        ) -> impl Strategy<Value = BTreeMap<String, ReplicaSpec>> {
            (
                proptest::option::of(replica_spec(replicas.clone())),
                proptest::option::of(replica_spec(replicas)),
            )
                .prop_map(|(master, worker)| {
                    let named = [("Master", master), ("Worker", worker)];
                    named
                        .into_iter()
                        .filter_map(|(role, spec)| Some((role.to_owned(), spec?)))
                        .collect()
                })
        }

        /// The pod's role (one the framework does not know among them) and index.
        fn pod() -> impl Strategy<Value = (&'static str, i32)> {
            (
                prop_oneof![Just("Master"), Just("Worker"), Just("Chief")],
                prop_oneof![0..8i32, any::<i32>()],
            )
        }

        fn ctx<'a>(
            info: &'a FrameworkInfo,
            specs: &'a BTreeMap<String, ReplicaSpec>,
            (role, index): (&'a str, i32),
        ) -> EnvContext<'a> {
            EnvContext {
                info,
                job: "pj",
                namespace: "ns",
                specs,
                role,
                index,
            }
        }

        proptest! {
            /// Any text parses or gives an error pointing at the brace that starts the problem.
            #[test]
            fn parse_is_a_value_or_an_error_at_a_brace(
                text in prop_oneof![any::<String>(), vec(token(), 0..12).prop_map(|t| t.concat()), template()],
                roles in proptest::sample::subsequence(ROLES.to_vec(), 0..=2),
            ) {
                if let Err(e) = Template::parse(&text, &roles) {
                    prop_assert_eq!(&e.template, &text);
                    prop_assert!(!e.message.is_empty());
                    prop_assert!(text.is_char_boundary(e.offset), "{}", e);
                    prop_assert!(text[e.offset..].starts_with(['{', '}']), "{}", e);
                }
            }

            /// Whatever parses renders for any job, small or with no roles: the only error is the
            /// port of a role the job does not have. (Counts stay small: `hosts` lists every
            /// replica.)
            #[test]
            fn parsed_templates_render(
                text in template(),
                specs in specs(proptest::option::of(prop_oneof![0..5i32, Just(1000)])),
                pod in pod(),
            ) {
                let info = info();
                if let Ok(t) = Template::parse(&text, &ROLES) {
                    let missing_port = t.parts.iter().any(|p| matches!(p, Part::Var(Var::Port(r)) if !specs.contains_key(r)));
                    match t.render(&ctx(&info, &specs, pod)) {
                        Ok(_) => prop_assert!(!missing_port),
                        Err(e) => prop_assert!(missing_port && e.0.contains("port is unknown"), "{}", e),
                    }
                }
            }

            /// Counts are exact at any replica count or index, even where they pass i32::MAX.
            #[test]
            fn counts_never_overflow(
                specs in specs(proptest::option::of(prop_oneof![0..5i32, (0..=i32::MAX)])),
                role in prop_oneof![Just("Master"), Just("Worker"), Just("Chief")],
                index in prop_oneof![0..5i32, (0..=i32::MAX)],
            ) {
                let info = info();
                let t = Template::parse("{rank} {total_replicas} {replicas.Master} {replicas.Worker}", &ROLES).unwrap();
                let replicas = |r: &str| specs.get(r).map_or(0, |s| i64::from(s.replicas()));
                let before = match role {
                    "Master" => 0,
                    "Worker" => replicas("Master"),
                    _ => replicas("Master") + replicas("Worker"),
                };
                let expected = format!(
                    "{} {} {} {}",
                    before + i64::from(index),
                    replicas("Master") + replicas("Worker"),
                    replicas("Master"),
                    replicas("Worker"),
                );
                prop_assert_eq!(t.render(&ctx(&info, &specs, (role, index))).unwrap(), expected);
            }

            /// Text without placeholders, its braces doubled, renders to itself whatever the job.
            #[test]
            fn escaped_text_renders_to_itself(
                text in any::<String>(),
                specs in specs(proptest::option::of(0..3i32)),
                pod in pod(),
            ) {
                let info = info();
                let escaped = text.replace('{', "{{").replace('}', "}}");
                let t = Template::parse(&escaped, &[]).unwrap();
                prop_assert_eq!(t.render(&ctx(&info, &specs, pod)).unwrap(), text);
            }
        }
    }
}
