//! The resources a gang needs before it may start (Kubeflow's `CalcPGMinResources`).
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::quantity::{Amount, QuantityError};
use crate::api::ReplicaSpec;

/// The summed requests of the first `min_member` pods, taking replica types in descending
/// priority of their pod template's PriorityClass (`priority_classes`: name -> value; a missing
/// or unknown class counts as 0). Per container, requests are summed, or its limits when it has
/// no requests at all. As in Kubeflow, init containers and pod overhead are not counted, and a
/// sort tie keeps role-name order (Kubeflow's is Go map order, i.e. random).
pub fn calc_min_resources(
    min_member: i32,
    specs: &BTreeMap<String, ReplicaSpec>,
    priority_classes: &BTreeMap<String, i32>,
) -> Result<BTreeMap<String, Quantity>, QuantityError> {
    let mut ordered: Vec<(i32, &ReplicaSpec)> = specs
        .values()
        .map(|spec| {
            let class = spec
                .template
                .spec
                .as_ref()
                .and_then(|s| s.priority_class_name.as_deref());
            let priority = class.and_then(|c| priority_classes.get(c)).copied().unwrap_or(0);
            (priority, spec)
        })
        .collect();
    // Stable, so equal priorities keep the BTreeMap's role order.
    ordered.sort_by_key(|(priority, _)| std::cmp::Reverse(*priority));

    let mut totals: BTreeMap<String, Amount> = BTreeMap::new();
    let mut counted = 0;
    for (_, spec) in ordered {
        let pod_resources = pod_resources(spec)?;
        for _ in 0..spec.replicas() {
            if counted >= min_member {
                break;
            }
            counted += 1;
            for (name, amount) in &pod_resources {
                add(&mut totals, name, *amount)?;
            }
        }
    }
    Ok(totals
        .into_iter()
        .map(|(name, amount)| (name, amount.to_quantity()))
        .collect())
}

/// One pod's sum over its regular containers: requests, or limits when requests are absent.
/// An explicitly empty `requests: {}` counts as given, as Go's non-nil map does.
fn pod_resources(spec: &ReplicaSpec) -> Result<BTreeMap<String, Amount>, QuantityError> {
    let mut totals = BTreeMap::new();
    let containers = spec.template.spec.iter().flat_map(|s| s.containers.iter());
    for container in containers {
        let Some(resources) = container.resources.as_ref() else {
            continue;
        };
        let list = resources.requests.as_ref().or(resources.limits.as_ref());
        for (name, quantity) in list.into_iter().flatten() {
            add(&mut totals, name, Amount::of(quantity)?)?;
        }
    }
    Ok(totals)
}

fn add(totals: &mut BTreeMap<String, Amount>, name: &str, amount: Amount) -> Result<(), QuantityError> {
    let current = totals.get(name).copied().unwrap_or(Amount::ZERO);
    let sum = current
        .checked_add(amount)
        .ok_or_else(|| QuantityError::OutOfRange(format!("sum of {name}")))?;
    totals.insert(name.to_owned(), sum);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(replicas: i32, priority_class: Option<&str>, containers: serde_json::Value) -> ReplicaSpec {
        serde_json::from_value(serde_json::json!({
            "replicas": replicas,
            "template": {"spec": {"priorityClassName": priority_class, "containers": containers}},
        }))
        .unwrap()
    }

    fn requests(cpu: &str, memory: &str) -> serde_json::Value {
        serde_json::json!([{"name": "main", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": memory}}}])
    }

    fn as_strings(list: &BTreeMap<String, Quantity>) -> BTreeMap<&str, &str> {
        list.iter().map(|(k, v)| (k.as_str(), v.0.as_str())).collect()
    }

    #[test]
    fn sums_all_pods_when_min_member_is_total() {
        let specs = BTreeMap::from([
            ("Master".to_owned(), spec(1, None, requests("1", "1Gi"))),
            ("Worker".to_owned(), spec(2, None, requests("500m", "512Mi"))),
        ]);
        let out = calc_min_resources(3, &specs, &BTreeMap::new()).unwrap();
        assert_eq!(
            as_strings(&out),
            BTreeMap::from([("cpu", "2"), ("memory", "2Gi")])
        );
    }

    #[test]
    fn higher_priority_replica_types_are_counted_first() {
        // Kubeflow's case: minMember smaller than the total; the high-priority type fills it.
        let specs = BTreeMap::from([
            ("Master".to_owned(), spec(1, Some("low"), requests("1", "1Gi"))),
            ("Worker".to_owned(), spec(3, Some("high"), requests("2", "2Gi"))),
        ]);
        let classes = BTreeMap::from([("high".to_owned(), 1000), ("low".to_owned(), 10)]);
        let out = calc_min_resources(2, &specs, &classes).unwrap();
        assert_eq!(
            as_strings(&out),
            BTreeMap::from([("cpu", "4"), ("memory", "4Gi")])
        );

        // Reversed priorities: the master first, then one worker.
        let classes = BTreeMap::from([("high".to_owned(), 1), ("low".to_owned(), 10)]);
        let out = calc_min_resources(2, &specs, &classes).unwrap();
        assert_eq!(
            as_strings(&out),
            BTreeMap::from([("cpu", "3"), ("memory", "3Gi")])
        );
    }

    #[test]
    fn unknown_priority_classes_count_as_zero_and_ties_keep_role_order() {
        let specs = BTreeMap::from([
            ("A".to_owned(), spec(1, Some("missing"), requests("1", "1Mi"))),
            ("B".to_owned(), spec(1, None, requests("2", "2Mi"))),
            ("C".to_owned(), spec(1, Some("neg"), requests("4", "4Mi"))),
        ]);
        let classes = BTreeMap::from([("neg".to_owned(), -5)]);
        let out = calc_min_resources(2, &specs, &classes).unwrap();
        assert_eq!(
            as_strings(&out),
            BTreeMap::from([("cpu", "3"), ("memory", "3Mi")])
        );
    }

    #[test]
    fn limits_count_only_when_a_container_has_no_requests() {
        let containers = serde_json::json!([
            {"name": "a", "image": "x", "resources": {"limits": {"cpu": "2", "nvidia.com/gpu": "1"}}},
            {"name": "b", "image": "x", "resources": {"requests": {"cpu": "250m"}, "limits": {"cpu": "8", "memory": "1Gi"}}},
            {"name": "c", "image": "x", "resources": {"requests": {}, "limits": {"cpu": "8"}}},
            {"name": "d", "image": "x"},
        ]);
        let specs = BTreeMap::from([("Worker".to_owned(), spec(2, None, containers))]);
        let out = calc_min_resources(2, &specs, &BTreeMap::new()).unwrap();
        assert_eq!(
            as_strings(&out),
            BTreeMap::from([("cpu", "4500m"), ("nvidia.com/gpu", "2")])
        );
    }

    #[test]
    fn init_containers_are_ignored_and_zero_members_need_nothing() {
        let specs = BTreeMap::from([(
            "Worker".to_owned(),
            serde_json::from_value(serde_json::json!({"replicas": 1, "template": {"spec": {
                "initContainers": [{"name": "i", "image": "x", "resources": {"requests": {"cpu": "10"}}}],
                "containers": [{"name": "m", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}}))
            .unwrap(),
        )]);
        let out = calc_min_resources(1, &specs, &BTreeMap::new()).unwrap();
        assert_eq!(as_strings(&out), BTreeMap::from([("cpu", "1")]));
        assert!(
            calc_min_resources(0, &specs, &BTreeMap::new())
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn invalid_quantities_are_errors() {
        let specs = BTreeMap::from([("Worker".to_owned(), spec(1, None, requests("lots", "1Gi")))]);
        assert_eq!(
            calc_min_resources(1, &specs, &BTreeMap::new()),
            Err(QuantityError::Invalid("lots".to_owned()))
        );
    }
}
