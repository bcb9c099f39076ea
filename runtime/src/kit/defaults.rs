//! Kubeflow's defaulting, applied in memory before planning (Kubeflow has no mutating webhook
//! either): role keys normalised to their canonical case, replica count and restart policy
//! filled in, and the framework's port appended to the default container.
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ContainerPort;

use crate::api::ReplicaSpec;
use crate::info::FrameworkInfo;

/// The defaulted copy of `specs`. Unknown role keys are kept as written (admission rejects them).
pub fn defaulted_specs(
    info: &FrameworkInfo,
    specs: &BTreeMap<String, ReplicaSpec>,
) -> BTreeMap<String, ReplicaSpec> {
    specs
        .iter()
        .map(|(key, spec)| {
            let mut spec = spec.clone();
            let role = info.role(key);
            if let Some(role) = role {
                spec.replicas.get_or_insert(role.default_replicas);
                spec.restart_policy.get_or_insert(role.default_restart_policy);
            }
            add_default_port(info, &mut spec);
            (role.map_or_else(|| key.clone(), |r| r.name.clone()), spec)
        })
        .collect()
}

/// Appends the framework port to the container named after the framework (else the first
/// container) unless a port of that name exists.
fn add_default_port(info: &FrameworkInfo, spec: &mut ReplicaSpec) {
    let (Some(port), Some(pod)) = (&info.default_port, spec.template.spec.as_mut()) else {
        return;
    };
    let index = info.default_container_index(pod.containers.iter().map(|c| c.name.as_str()));
    let Some(container) = pod.containers.get_mut(index) else {
        return;
    };
    let ports = container.ports.get_or_insert_with(Vec::new);
    if !ports
        .iter()
        .any(|p| p.name.as_deref() == Some(port.name.as_str()))
    {
        ports.push(ContainerPort {
            name: Some(port.name.clone()),
            container_port: port.number,
            ..ContainerPort::default()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::RestartPolicy;
    use crate::info::{FrameworkPort, Role};

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

    fn spec(json: serde_json::Value) -> ReplicaSpec {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn keys_are_normalised_and_defaults_filled() {
        let specs = BTreeMap::from([(
            "worker".to_owned(),
            spec(
                serde_json::json!({"template": {"spec": {"containers": [{"name": "pytorch", "image": "x"}]}}}),
            ),
        )]);
        let out = defaulted_specs(&info(), &specs);
        let worker = &out["Worker"];
        assert_eq!(worker.replicas, Some(1));
        assert_eq!(worker.restart_policy, Some(RestartPolicy::OnFailure));
        let ports = worker.template.spec.as_ref().unwrap().containers[0]
            .ports
            .as_ref()
            .unwrap();
        assert_eq!(
            (ports[0].name.as_deref(), ports[0].container_port),
            (Some("pytorchjob-port"), 23456)
        );
    }

    #[test]
    fn existing_port_and_explicit_values_are_kept() {
        let specs = BTreeMap::from([(
            "Master".to_owned(),
            spec(
                serde_json::json!({"replicas": 2, "restartPolicy": "Never", "template": {"spec": {"containers": [
                {"name": "sidecar", "image": "s"},
                {"name": "pytorch", "image": "x", "ports": [{"name": "pytorchjob-port", "containerPort": 8080}]}]}}}),
            ),
        )]);
        let out = defaulted_specs(&info(), &specs);
        let master = &out["Master"];
        assert_eq!(
            (master.replicas, master.restart_policy),
            (Some(2), Some(RestartPolicy::Never))
        );
        let containers = &master.template.spec.as_ref().unwrap().containers;
        assert!(containers[0].ports.is_none());
        assert_eq!(containers[1].ports.as_ref().unwrap().len(), 1);
        assert_eq!(containers[1].ports.as_ref().unwrap()[0].container_port, 8080);
    }

    mod properties {
        use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
        use proptest::collection::{btree_map, vec};
        use proptest::prelude::*;

        use super::*;

        fn policy() -> impl Strategy<Value = RestartPolicy> {
            prop_oneof![
                Just(RestartPolicy::Always),
                Just(RestartPolicy::OnFailure),
                Just(RestartPolicy::Never),
                Just(RestartPolicy::ExitCode),
            ]
        }

        /// The test framework with random role defaults.
        fn framework() -> impl Strategy<Value = FrameworkInfo> {
            (0..3i32, policy(), 0..3i32, policy()).prop_map(
                |(master, master_policy, worker, worker_policy)| FrameworkInfo {
                    roles: vec![
                        Role::new("Master", master_policy)
                            .master()
                            .default_replicas(master),
                        Role::new("Worker", worker_policy).default_replicas(worker),
                    ],
                    ..info()
                },
            )
        }

        /// Containers named like the framework's default one or not, with or without its port.
        fn container() -> impl Strategy<Value = Container> {
            let port = (
                proptest::option::of(proptest::sample::select(vec!["pytorchjob-port", "other"])),
                any::<i32>(),
            )
                .prop_map(|(name, container_port)| ContainerPort {
                    name: name.map(str::to_owned),
                    container_port,
                    ..ContainerPort::default()
                });
            (
                proptest::sample::select(vec!["pytorch", "sidecar", ""]),
                proptest::option::of(vec(port, 0..3)),
            )
                .prop_map(|(name, ports)| Container {
                    name: name.to_owned(),
                    ports,
                    ..Container::default()
                })
        }

        fn replica_spec() -> impl Strategy<Value = ReplicaSpec> {
            (
                proptest::option::of(any::<i32>()),
                proptest::option::of(policy()),
                proptest::option::of(vec(container(), 0..3)),
            )
                .prop_map(|(replicas, restart_policy, containers)| ReplicaSpec {
                    replicas,
                    template: Box::new(PodTemplateSpec {
                        metadata: None,
                        spec: containers.map(|containers| PodSpec {
                            containers,
                            ..PodSpec::default()
                        }),
                    }),
                    restart_policy,
                })
        }

        /// Role keys in any case (the same role twice among them, which admission rejects),
        /// and keys of no role.
        fn specs() -> impl Strategy<Value = BTreeMap<String, ReplicaSpec>> {
            let key = proptest::sample::select(vec![
                "Master", "master", "Worker", "worker", "WORKER", "Chief", "",
            ]);
            btree_map(key.prop_map(str::to_owned), replica_spec(), 0..4)
        }

        proptest! {
            #[test]
            fn defaulting_is_idempotent(info in framework(), specs in specs()) {
                let once = defaulted_specs(&info, &specs);
                prop_assert_eq!(defaulted_specs(&info, &once), once);
            }

            /// Known keys become canonical and get a count and policy, explicit values are kept,
            /// and the only change to a pod is the framework's port on the default container.
            #[test]
            fn defaulting_fills_in_and_keeps(info in framework(), specs in specs()) {
                let out = defaulted_specs(&info, &specs);
                for (key, spec) in &specs {
                    let Some(role) = info.role(key) else {
                        prop_assert_eq!(&out[key].replicas, &spec.replicas);
                        prop_assert_eq!(&out[key].restart_policy, &spec.restart_policy);
                        continue;
                    };
                    prop_assert!(!out.contains_key(key) || *key == role.name, "{} kept", key);
                    // Of several spellings of one role the last wins; only it is compared.
                    if specs.keys().rfind(|k| k.eq_ignore_ascii_case(key)) != Some(key) {
                        continue;
                    }
                    let d = &out[&role.name];
                    prop_assert_eq!(d.replicas, Some(spec.replicas.unwrap_or(role.default_replicas)));
                    prop_assert_eq!(
                        d.restart_policy,
                        Some(spec.restart_policy.unwrap_or(role.default_restart_policy))
                    );
                    let (Some(before), Some(after)) = (&spec.template.spec, &d.template.spec) else {
                        prop_assert_eq!(&spec.template, &d.template);
                        continue;
                    };
                    prop_assert_eq!(before.containers.len(), after.containers.len());
                    let default = info.default_container_index(before.containers.iter().map(|c| c.name.as_str()));
                    for (i, (b, a)) in before.containers.iter().zip(&after.containers).enumerate() {
                        if i != default {
                            prop_assert_eq!(b, a);
                            continue;
                        }
                        let (b_ports, a_ports) = (b.ports.clone().unwrap_or_default(), a.ports.clone().unwrap_or_default());
                        prop_assert_eq!(&a_ports[..b_ports.len()], &b_ports[..]);
                        let Some(port) = &info.default_port else { continue };
                        let named = |p: &ContainerPort| p.name.as_deref() == Some(port.name.as_str());
                        if b_ports.iter().any(named) {
                            prop_assert_eq!(a_ports.len(), b_ports.len());
                        } else {
                            prop_assert_eq!(a_ports.len(), b_ports.len() + 1);
                            prop_assert_eq!(a_ports[b_ports.len()].container_port, port.number);
                            prop_assert!(named(&a_ports[b_ports.len()]));
                        }
                    }
                }
            }
        }
    }
}
