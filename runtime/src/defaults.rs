//! Kubeflow's defaulting, applied in memory before planning (Kubeflow has no mutating webhook
//! either): role keys normalised to their canonical case, replica count and restart policy
//! filled in, and the framework's port appended to the default container.
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ContainerPort;

use crate::api::ReplicaSpec;
use crate::framework::FrameworkInfo;

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
    let Some(pod) = spec.template.spec.as_mut() else {
        return;
    };
    let index = pod
        .containers
        .iter()
        .position(|c| c.name == info.default_container)
        .unwrap_or(0);
    let Some(container) = pod.containers.get_mut(index) else {
        return;
    };
    let ports = container.ports.get_or_insert_with(Vec::new);
    if !ports
        .iter()
        .any(|p| p.name.as_deref() == Some(info.default_port_name.as_str()))
    {
        ports.push(ContainerPort {
            name: Some(info.default_port_name.clone()),
            container_port: info.default_port,
            ..ContainerPort::default()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::RestartPolicy;
    use crate::framework::Role;

    fn info() -> FrameworkInfo {
        FrameworkInfo {
            controller_name: "pytorchjob-controller".into(),
            framework_name: "pytorch".into(),
            default_container: "pytorch".into(),
            default_port_name: "pytorchjob-port".into(),
            default_port: 23456,
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
}
