//! The `Framework` resource (`kfop.dev/v1alpha1`, cluster-scoped): a `kfop.yaml` applied to the
//! cluster. Its spec is the manifest's, kept as given and validated by the operator with the
//! same validator `kfop gen` runs, so both report the same field-named errors.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Deleting a Framework with this annotation set to `"true"` also deletes its job kind's CRD
/// (and with it every job of the kind); without it the CRD and the jobs stay.
pub const REMOVE_CRD_ANNOTATION: &str = "kfop.dev/remove-crd-on-delete";

/// The manifest's `spec`, as given (see `kfop.yaml`).
// Two printer columns of one type read to clippy as a repeated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kfop.dev",
    version = "v1alpha1",
    kind = "Framework",
    plural = "frameworks",
    status = "FrameworkStatus",
    doc = "A training framework registered at run time: a kfop.yaml manifest whose job kind the all-in-one operator installs and reconciles.",
    printcolumn(name = "Kind", type_ = "string", json_path = ".spec.kind"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[schemars(transform = manifest_schema)]
pub struct FrameworkSpec {
    #[serde(flatten)]
    pub fields: serde_json::Map<String, serde_json::Value>,
}

/// The spec's schema: an object kept as given; the operator validates it (a CRD schema cannot
/// check env templates or role references).
fn manifest_schema(schema: &mut schemars::Schema) {
    *schema = schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    });
}

/// What the operator made of the Framework.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FrameworkStatus {
    /// The generation these conditions describe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Accepted` (the manifest is valid and may run here) and `Ready` (its CRD is established
    /// and its controller runs).
    #[serde(default)]
    pub conditions: Vec<FrameworkCondition>,
}

/// One condition of a Framework.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FrameworkCondition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True` or `False`.
    pub status: String,
    pub reason: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

impl FrameworkCondition {
    pub fn new(type_: &str, ok: bool, reason: &str, message: impl Into<String>) -> Self {
        Self {
            type_: type_.to_owned(),
            status: if ok { "True" } else { "False" }.to_owned(),
            reason: reason.to_owned(),
            message: message.into(),
            last_transition_time: Some(Time(k8s_openapi::jiff::Timestamp::now())),
        }
    }
}
