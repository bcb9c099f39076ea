//! Rules on the whole object, the only place a rule can read `metadata.name`.
use crate::rule::Rule;
use crate::shape::Shape;

/// The job's name starts every child's name, `<job>-<replica type>-<index>`: a Service name is a
/// DNS-1035 label, so Kubeflow's webhooks require the job name to be one, and mpi-operator checks
/// the longest worker's. (A role whose pods the engine does not create, such as MPI's launcher, a
/// batch Job `<job>-launcher`, is held to the same length: two characters stricter than it
/// needs.) The API server reports these at the root (`<nil>`): a `fieldPath` must be in the
/// schema, which has no `metadata` properties.
pub fn root_rules(shape: &Shape) -> Vec<Rule> {
    let specs = format!("self.spec.{}", shape.replica_specs);
    // An absent count is the role's default; the largest default gives the longest index.
    let default_index = shape
        .roles
        .iter()
        .map(|r| r.default_replicas.unwrap_or(1) - 1)
        .max()
        .unwrap_or(0)
        .max(0);
    let count = format!("{specs}[k].replicas");
    let last_index = format!("has({count}) ? ({count} > 1 ? {count} - 1 : 0) : {default_index}");
    vec![
        Rule::new(
            "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
            "metadata.name must be a DNS-1035 label (lower-case letters, digits and '-', starting with a letter and ending with a letter or digit): it starts the names of the job's pods and Services; rename the job",
        ),
        Rule::new(
            // 63 characters less the two dashes.
            format!(
                "{specs}.all(k, self.metadata.name.size() + k.size() + string({last_index}).size() <= 61)"
            ),
            "metadata.name is too long for the job's pod and Service names (<name>-<replica type>-<index> must be at most 63 characters): shorten the name",
        ),
    ]
}
