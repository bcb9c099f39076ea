//! k8s-openapi objects to k8s-pb messages for what kfop sends, and back for what it keeps.
//!
//! Hand-written because no crate converts between the two (k8s-pb has prost messages only, no
//! serde). A pod carries the user's whole template, so a conversion covers a set of fields,
//! named in a [`Shape`] beside it, and an object holding any other field (its JSON form is
//! checked against the shape) is not converted: it is sent as JSON. What comes back is read only
//! as far as the caches keep it: metadata, and a pod's status as [`crate::cache::slim_pod`]
//! leaves it.
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as api;
use k8s_openapi::api::events::v1 as events;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use k8s_pb::api::core::v1 as pb;
use k8s_pb::apimachinery::pkg::api::resource as pb_resource;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb_meta;
use k8s_pb::apimachinery::pkg::util::intstr as pb_intstr;
use kube::Resource;
use serde_json::Value;

use crate::child_view::{ObservedPod, ObservedService};

/// A built-in kind kfop creates, with its protobuf form.
pub trait Wire: Resource<DynamicType = ()> + serde::Serialize + Sized {
    type Pb: prost::Message + Default + k8s_pb::Resource;
    /// The JSON fields [`Wire::to_pb`] carries over.
    const SHAPE: &'static Shape;
    const KIND: &'static str;

    /// The protobuf form, or `None` when the object holds a field the conversion does not cover.
    fn to_pb(&self) -> Option<Self::Pb> {
        let json = serde_json::to_value(self).ok()?;
        if !Self::SHAPE.covers(&json) {
            tracing::debug!(
                kind = Self::KIND,
                "a field without protobuf conversion: sent as JSON"
            );
            return None;
        }
        Some(self.convert())
    }

    /// The protobuf form of the fields in [`Wire::SHAPE`].
    fn convert(&self) -> Self::Pb;

    /// What kfop keeps of a created object the server returned.
    fn from_pb(pb: Self::Pb) -> Self;
}

/// The JSON fields a conversion covers: any value, or an object (or a list of objects) with only
/// the named fields, each of its shape.
#[derive(Debug)]
pub enum Shape {
    Any,
    Fields(&'static [(&'static str, &'static Shape)]),
}

impl Shape {
    pub fn covers(&self, value: &Value) -> bool {
        match (self, value) {
            (Self::Any, _) => true,
            (Self::Fields(fields), Value::Object(object)) => object.iter().all(|(key, value)| {
                fields
                    .iter()
                    .find(|(name, _)| name == key)
                    .is_some_and(|(_, shape)| shape.covers(value))
            }),
            (Self::Fields(_), Value::Array(items)) => items.iter().all(|item| self.covers(item)),
            (Self::Fields(_), _) => value.is_null(),
        }
    }
}

const ANY: Shape = Shape::Any;
const TYPE_META: [(&str, &Shape); 2] = [("apiVersion", &ANY), ("kind", &ANY)];
const OWNER: Shape = Shape::Fields(&[
    ("apiVersion", &ANY),
    ("kind", &ANY),
    ("name", &ANY),
    ("uid", &ANY),
    ("controller", &ANY),
    ("blockOwnerDeletion", &ANY),
]);
const META: Shape = Shape::Fields(&[
    ("name", &ANY),
    ("generateName", &ANY),
    ("namespace", &ANY),
    ("uid", &ANY),
    ("resourceVersion", &ANY),
    ("generation", &ANY),
    ("creationTimestamp", &ANY),
    ("deletionTimestamp", &ANY),
    ("deletionGracePeriodSeconds", &ANY),
    ("labels", &ANY),
    ("annotations", &ANY),
    ("ownerReferences", &OWNER),
    ("finalizers", &ANY),
]);
const REFERENCE: Shape = Shape::Fields(&[
    ("apiVersion", &ANY),
    ("kind", &ANY),
    ("namespace", &ANY),
    ("name", &ANY),
    ("uid", &ANY),
    ("resourceVersion", &ANY),
    ("fieldPath", &ANY),
]);
const NAME: Shape = Shape::Fields(&[("name", &ANY)]);
const FIELD_REF: Shape = Shape::Fields(&[("apiVersion", &ANY), ("fieldPath", &ANY)]);
const KEY_TO_PATH: Shape = Shape::Fields(&[("key", &ANY), ("path", &ANY), ("mode", &ANY)]);
const CONTAINER: Shape = Shape::Fields(&[
    ("name", &ANY),
    ("image", &ANY),
    ("command", &ANY),
    ("args", &ANY),
    ("workingDir", &ANY),
    (
        "ports",
        &Shape::Fields(&[
            ("name", &ANY),
            ("hostPort", &ANY),
            ("containerPort", &ANY),
            ("protocol", &ANY),
            ("hostIP", &ANY),
        ]),
    ),
    (
        "env",
        &Shape::Fields(&[
            ("name", &ANY),
            ("value", &ANY),
            ("valueFrom", &Shape::Fields(&[("fieldRef", &FIELD_REF)])),
        ]),
    ),
    (
        "resources",
        &Shape::Fields(&[("limits", &ANY), ("requests", &ANY)]),
    ),
    (
        "volumeMounts",
        &Shape::Fields(&[
            ("name", &ANY),
            ("readOnly", &ANY),
            ("recursiveReadOnly", &ANY),
            ("mountPath", &ANY),
            ("subPath", &ANY),
            ("mountPropagation", &ANY),
            ("subPathExpr", &ANY),
        ]),
    ),
    ("terminationMessagePath", &ANY),
    ("terminationMessagePolicy", &ANY),
    ("imagePullPolicy", &ANY),
    ("stdin", &ANY),
    ("stdinOnce", &ANY),
    ("tty", &ANY),
]);
const VOLUME: Shape = Shape::Fields(&[
    ("name", &ANY),
    (
        "emptyDir",
        &Shape::Fields(&[("medium", &ANY), ("sizeLimit", &ANY)]),
    ),
    (
        "configMap",
        &Shape::Fields(&[
            ("name", &ANY),
            ("items", &KEY_TO_PATH),
            ("defaultMode", &ANY),
            ("optional", &ANY),
        ]),
    ),
    (
        "secret",
        &Shape::Fields(&[
            ("secretName", &ANY),
            ("items", &KEY_TO_PATH),
            ("defaultMode", &ANY),
            ("optional", &ANY),
        ]),
    ),
    (
        "projected",
        &Shape::Fields(&[
            ("defaultMode", &ANY),
            (
                "sources",
                &Shape::Fields(&[
                    (
                        "serviceAccountToken",
                        &Shape::Fields(&[("audience", &ANY), ("expirationSeconds", &ANY), ("path", &ANY)]),
                    ),
                    (
                        "configMap",
                        &Shape::Fields(&[("name", &ANY), ("items", &KEY_TO_PATH), ("optional", &ANY)]),
                    ),
                    (
                        "downwardAPI",
                        &Shape::Fields(&[(
                            "items",
                            &Shape::Fields(&[("path", &ANY), ("fieldRef", &FIELD_REF), ("mode", &ANY)]),
                        )]),
                    ),
                ]),
            ),
        ]),
    ),
]);
const POD_SPEC: Shape = Shape::Fields(&[
    ("volumes", &VOLUME),
    ("initContainers", &CONTAINER),
    ("containers", &CONTAINER),
    ("restartPolicy", &ANY),
    ("terminationGracePeriodSeconds", &ANY),
    ("activeDeadlineSeconds", &ANY),
    ("dnsPolicy", &ANY),
    ("nodeSelector", &ANY),
    ("serviceAccountName", &ANY),
    ("serviceAccount", &ANY),
    ("automountServiceAccountToken", &ANY),
    ("nodeName", &ANY),
    ("hostNetwork", &ANY),
    ("hostPID", &ANY),
    ("hostIPC", &ANY),
    ("shareProcessNamespace", &ANY),
    (
        "securityContext",
        &Shape::Fields(&[
            ("runAsUser", &ANY),
            ("runAsGroup", &ANY),
            ("runAsNonRoot", &ANY),
            ("supplementalGroups", &ANY),
            ("fsGroup", &ANY),
        ]),
    ),
    ("imagePullSecrets", &NAME),
    ("hostname", &ANY),
    ("subdomain", &ANY),
    ("schedulerName", &ANY),
    (
        "tolerations",
        &Shape::Fields(&[
            ("key", &ANY),
            ("operator", &ANY),
            ("value", &ANY),
            ("effect", &ANY),
            ("tolerationSeconds", &ANY),
        ]),
    ),
    ("priorityClassName", &ANY),
    ("priority", &ANY),
    ("runtimeClassName", &ANY),
    ("enableServiceLinks", &ANY),
    ("preemptionPolicy", &ANY),
    ("setHostnameAsFQDN", &ANY),
    ("schedulingGates", &NAME),
]);
const POD: Shape = Shape::Fields(&[
    TYPE_META[0],
    TYPE_META[1],
    ("metadata", &META),
    ("spec", &POD_SPEC),
]);
const SERVICE: Shape = Shape::Fields(&[
    TYPE_META[0],
    TYPE_META[1],
    ("metadata", &META),
    (
        "spec",
        &Shape::Fields(&[
            (
                "ports",
                &Shape::Fields(&[
                    ("name", &ANY),
                    ("protocol", &ANY),
                    ("appProtocol", &ANY),
                    ("port", &ANY),
                    ("targetPort", &ANY),
                    ("nodePort", &ANY),
                ]),
            ),
            ("selector", &ANY),
            ("clusterIP", &ANY),
            ("clusterIPs", &ANY),
            ("type", &ANY),
            ("sessionAffinity", &ANY),
            ("publishNotReadyAddresses", &ANY),
            ("ipFamilies", &ANY),
            ("ipFamilyPolicy", &ANY),
            ("internalTrafficPolicy", &ANY),
        ]),
    ),
]);
const EVENT: Shape = Shape::Fields(&[
    TYPE_META[0],
    TYPE_META[1],
    ("metadata", &META),
    ("eventTime", &ANY),
    ("reportingController", &ANY),
    ("reportingInstance", &ANY),
    ("action", &ANY),
    ("reason", &ANY),
    ("regarding", &REFERENCE),
    ("related", &REFERENCE),
    ("note", &ANY),
    ("type", &ANY),
]);

impl Wire for api::Pod {
    type Pb = pb::Pod;
    const SHAPE: &'static Shape = &POD;
    const KIND: &'static str = "Pod";

    fn convert(&self) -> pb::Pod {
        pb::Pod {
            metadata: Some(meta_to_pb(&self.metadata)),
            spec: self.spec.as_ref().map(pod_spec),
            status: None,
        }
    }

    /// Metadata and the status the pod cache keeps; no spec (the planner never reads it back).
    fn from_pb(pod: pb::Pod) -> Self {
        Self {
            metadata: pod.metadata.map(meta_from_pb).unwrap_or_default(),
            spec: None,
            status: pod.status.map(pod_status),
        }
    }
}

impl Wire for api::Service {
    type Pb = pb::Service;
    const SHAPE: &'static Shape = &SERVICE;
    const KIND: &'static str = "Service";

    fn convert(&self) -> pb::Service {
        pb::Service {
            metadata: Some(meta_to_pb(&self.metadata)),
            spec: self.spec.as_ref().map(|s| pb::ServiceSpec {
                ports: list(&s.ports, |p| pb::ServicePort {
                    name: p.name.clone(),
                    protocol: p.protocol.clone(),
                    app_protocol: p.app_protocol.clone(),
                    port: Some(p.port),
                    target_port: p.target_port.as_ref().map(int_or_string),
                    node_port: p.node_port,
                }),
                selector: map(&s.selector),
                cluster_ip: s.cluster_ip.clone(),
                cluster_ips: s.cluster_ips.clone().unwrap_or_default(),
                r#type: s.type_.clone(),
                session_affinity: s.session_affinity.clone(),
                publish_not_ready_addresses: s.publish_not_ready_addresses,
                ip_families: s.ip_families.clone().unwrap_or_default(),
                ip_family_policy: s.ip_family_policy.clone(),
                internal_traffic_policy: s.internal_traffic_policy.clone(),
                ..pb::ServiceSpec::default()
            }),
            status: None,
        }
    }

    /// Metadata only, as the service cache keeps it.
    fn from_pb(service: pb::Service) -> Self {
        Self {
            metadata: service.metadata.map(meta_from_pb).unwrap_or_default(),
            ..Self::default()
        }
    }
}

/// A watched pod as the pod cache takes it: metadata and the status [`crate::cache::slim_pod`]
/// keeps, the same as from a JSON watch.
pub fn observed_pod(pod: pb::Pod) -> ObservedPod {
    api::Pod::from_pb(pod).into()
}

/// A service from a metadata-only watch.
pub fn observed_service(service: pb_meta::PartialObjectMetadata) -> ObservedService {
    use kube::core::PartialObjectMetaExt;
    service
        .metadata
        .map(meta_from_pb)
        .unwrap_or_default()
        .into_response_partial::<api::Service>()
}

impl Wire for events::Event {
    type Pb = k8s_pb::api::events::v1::Event;
    const SHAPE: &'static Shape = &EVENT;
    const KIND: &'static str = "Event";

    fn convert(&self) -> Self::Pb {
        Self::Pb {
            metadata: Some(meta_to_pb(&self.metadata)),
            event_time: self.event_time.as_ref().map(|t| {
                let (seconds, nanos) = split(t.0);
                pb_meta::MicroTime { seconds, nanos }
            }),
            reporting_controller: self.reporting_controller.clone(),
            reporting_instance: self.reporting_instance.clone(),
            action: self.action.clone(),
            reason: self.reason.clone(),
            regarding: self.regarding.as_ref().map(reference),
            related: self.related.as_ref().map(reference),
            note: self.note.clone(),
            r#type: self.type_.clone(),
            ..Self::Pb::default()
        }
    }

    /// Metadata only: nothing reads a created event back.
    fn from_pb(event: Self::Pb) -> Self {
        Self {
            metadata: event.metadata.map(meta_from_pb).unwrap_or_default(),
            ..Self::default()
        }
    }
}

fn list<T, U>(items: &Option<Vec<T>>, f: impl Fn(&T) -> U) -> Vec<U> {
    items.iter().flatten().map(f).collect()
}

fn map(map: &Option<BTreeMap<String, String>>) -> BTreeMap<String, String> {
    map.clone().unwrap_or_default()
}

fn quantities(map: &Option<BTreeMap<String, Quantity>>) -> BTreeMap<String, pb_resource::Quantity> {
    map.iter()
        .flatten()
        .map(|(k, q)| (k.clone(), quantity(q)))
        .collect()
}

fn quantity(q: &Quantity) -> pb_resource::Quantity {
    pb_resource::Quantity {
        string: Some(q.0.clone()),
    }
}

fn int_or_string(value: &IntOrString) -> pb_intstr::IntOrString {
    match value {
        IntOrString::Int(i) => pb_intstr::IntOrString {
            r#type: Some(0),
            int_val: Some(*i),
            str_val: None,
        },
        IntOrString::String(s) => pb_intstr::IntOrString {
            r#type: Some(1),
            int_val: None,
            str_val: Some(s.clone()),
        },
    }
}

fn split(at: Timestamp) -> (Option<i64>, Option<i32>) {
    (Some(at.as_second()), Some(at.subsec_nanosecond()))
}

fn time(t: &meta::Time) -> pb_meta::Time {
    let (seconds, nanos) = split(t.0);
    pb_meta::Time { seconds, nanos }
}

/// An empty message is Go's zero time, which JSON writes as null.
fn time_from_pb(t: pb_meta::Time) -> Option<meta::Time> {
    if t.seconds.is_none() && t.nanos.is_none() {
        return None;
    }
    Timestamp::new(t.seconds.unwrap_or_default(), t.nanos.unwrap_or_default())
        .ok()
        .map(meta::Time)
}

fn meta_to_pb(m: &meta::ObjectMeta) -> pb_meta::ObjectMeta {
    pb_meta::ObjectMeta {
        name: m.name.clone(),
        generate_name: m.generate_name.clone(),
        namespace: m.namespace.clone(),
        uid: m.uid.clone(),
        resource_version: m.resource_version.clone(),
        generation: m.generation,
        creation_timestamp: m.creation_timestamp.as_ref().map(time),
        deletion_timestamp: m.deletion_timestamp.as_ref().map(time),
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        labels: map(&m.labels),
        annotations: map(&m.annotations),
        owner_references: list(&m.owner_references, |o| pb_meta::OwnerReference {
            api_version: Some(o.api_version.clone()),
            kind: Some(o.kind.clone()),
            name: Some(o.name.clone()),
            uid: Some(o.uid.clone()),
            controller: o.controller,
            block_owner_deletion: o.block_owner_deletion,
        }),
        finalizers: m.finalizers.clone().unwrap_or_default(),
        ..pb_meta::ObjectMeta::default()
    }
}

/// Empty lists and maps read as absent, as in JSON (the server omits them).
fn some<T: IsEmpty>(value: T) -> Option<T> {
    (!value.is_empty()).then_some(value)
}

/// A field JSON omits when empty (`omitempty`), which protobuf carries as its zero value: read
/// as absent, so an object reads the same from either encoding.
fn given<T: Default + PartialEq>(value: Option<T>) -> Option<T> {
    value.filter(|v| *v != T::default())
}

trait IsEmpty {
    fn is_empty(&self) -> bool;
}

impl<T> IsEmpty for Vec<T> {
    fn is_empty(&self) -> bool {
        Vec::is_empty(self)
    }
}

impl<K, V> IsEmpty for BTreeMap<K, V> {
    fn is_empty(&self) -> bool {
        BTreeMap::is_empty(self)
    }
}

/// Everything but managed fields (the caches drop them).
fn meta_from_pb(m: pb_meta::ObjectMeta) -> meta::ObjectMeta {
    meta::ObjectMeta {
        name: given(m.name),
        generate_name: given(m.generate_name),
        namespace: given(m.namespace),
        self_link: given(m.self_link),
        uid: given(m.uid),
        resource_version: given(m.resource_version),
        generation: given(m.generation),
        creation_timestamp: m.creation_timestamp.and_then(time_from_pb),
        deletion_timestamp: m.deletion_timestamp.and_then(time_from_pb),
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        labels: some(m.labels),
        annotations: some(m.annotations),
        owner_references: some(
            m.owner_references
                .into_iter()
                .map(|o| meta::OwnerReference {
                    api_version: o.api_version.unwrap_or_default(),
                    kind: o.kind.unwrap_or_default(),
                    name: o.name.unwrap_or_default(),
                    uid: o.uid.unwrap_or_default(),
                    controller: o.controller,
                    block_owner_deletion: o.block_owner_deletion,
                })
                .collect(),
        ),
        finalizers: some(m.finalizers),
        managed_fields: None,
    }
}

fn reference(r: &api::ObjectReference) -> pb::ObjectReference {
    pb::ObjectReference {
        kind: r.kind.clone(),
        namespace: r.namespace.clone(),
        name: r.name.clone(),
        uid: r.uid.clone(),
        api_version: r.api_version.clone(),
        resource_version: r.resource_version.clone(),
        field_path: r.field_path.clone(),
    }
}

fn field_ref(f: &api::ObjectFieldSelector) -> pb::ObjectFieldSelector {
    pb::ObjectFieldSelector {
        api_version: f.api_version.clone(),
        field_path: Some(f.field_path.clone()),
    }
}

fn key_to_path(k: &api::KeyToPath) -> pb::KeyToPath {
    pb::KeyToPath {
        key: Some(k.key.clone()),
        path: Some(k.path.clone()),
        mode: k.mode,
    }
}

fn local_name(name: &str) -> Option<pb::LocalObjectReference> {
    Some(pb::LocalObjectReference {
        name: Some(name.to_owned()),
    })
}

fn pod_spec(s: &api::PodSpec) -> pb::PodSpec {
    pb::PodSpec {
        volumes: list(&s.volumes, volume),
        init_containers: list(&s.init_containers, container),
        containers: s.containers.iter().map(container).collect(),
        restart_policy: s.restart_policy.clone(),
        termination_grace_period_seconds: s.termination_grace_period_seconds,
        active_deadline_seconds: s.active_deadline_seconds,
        dns_policy: s.dns_policy.clone(),
        node_selector: map(&s.node_selector),
        service_account_name: s.service_account_name.clone(),
        service_account: s.service_account.clone(),
        automount_service_account_token: s.automount_service_account_token,
        node_name: s.node_name.clone(),
        host_network: s.host_network,
        host_pid: s.host_pid,
        host_ipc: s.host_ipc,
        share_process_namespace: s.share_process_namespace,
        security_context: s.security_context.as_ref().map(|c| pb::PodSecurityContext {
            run_as_user: c.run_as_user,
            run_as_group: c.run_as_group,
            run_as_non_root: c.run_as_non_root,
            supplemental_groups: c.supplemental_groups.clone().unwrap_or_default(),
            fs_group: c.fs_group,
            ..pb::PodSecurityContext::default()
        }),
        image_pull_secrets: list(&s.image_pull_secrets, |r| pb::LocalObjectReference {
            name: Some(r.name.clone()),
        }),
        hostname: s.hostname.clone(),
        subdomain: s.subdomain.clone(),
        scheduler_name: s.scheduler_name.clone(),
        tolerations: list(&s.tolerations, |t| pb::Toleration {
            key: t.key.clone(),
            operator: t.operator.clone(),
            value: t.value.clone(),
            effect: t.effect.clone(),
            toleration_seconds: t.toleration_seconds,
        }),
        priority_class_name: s.priority_class_name.clone(),
        priority: s.priority,
        runtime_class_name: s.runtime_class_name.clone(),
        enable_service_links: s.enable_service_links,
        preemption_policy: s.preemption_policy.clone(),
        set_hostname_as_fqdn: s.set_hostname_as_fqdn,
        scheduling_gates: list(&s.scheduling_gates, |g| pb::PodSchedulingGate {
            name: Some(g.name.clone()),
        }),
        ..pb::PodSpec::default()
    }
}

fn container(c: &api::Container) -> pb::Container {
    pb::Container {
        name: Some(c.name.clone()),
        image: c.image.clone(),
        command: c.command.clone().unwrap_or_default(),
        args: c.args.clone().unwrap_or_default(),
        working_dir: c.working_dir.clone(),
        ports: list(&c.ports, |p| pb::ContainerPort {
            name: p.name.clone(),
            host_port: p.host_port,
            container_port: Some(p.container_port),
            protocol: p.protocol.clone(),
            host_ip: p.host_ip.clone(),
        }),
        env: list(&c.env, |e| pb::EnvVar {
            name: Some(e.name.clone()),
            value: e.value.clone(),
            value_from: e.value_from.as_ref().map(|v| pb::EnvVarSource {
                field_ref: v.field_ref.as_ref().map(field_ref),
                ..pb::EnvVarSource::default()
            }),
        }),
        resources: c.resources.as_ref().map(|r| pb::ResourceRequirements {
            limits: quantities(&r.limits),
            requests: quantities(&r.requests),
            ..pb::ResourceRequirements::default()
        }),
        volume_mounts: list(&c.volume_mounts, |m| pb::VolumeMount {
            name: Some(m.name.clone()),
            read_only: m.read_only,
            recursive_read_only: m.recursive_read_only.clone(),
            mount_path: Some(m.mount_path.clone()),
            sub_path: m.sub_path.clone(),
            mount_propagation: m.mount_propagation.clone(),
            sub_path_expr: m.sub_path_expr.clone(),
        }),
        termination_message_path: c.termination_message_path.clone(),
        termination_message_policy: c.termination_message_policy.clone(),
        image_pull_policy: c.image_pull_policy.clone(),
        stdin: c.stdin,
        stdin_once: c.stdin_once,
        tty: c.tty,
        ..pb::Container::default()
    }
}

fn volume(v: &api::Volume) -> pb::Volume {
    pb::Volume {
        name: Some(v.name.clone()),
        volume_source: Some(pb::VolumeSource {
            empty_dir: v.empty_dir.as_ref().map(|e| pb::EmptyDirVolumeSource {
                medium: e.medium.clone(),
                size_limit: e.size_limit.as_ref().map(quantity),
            }),
            config_map: v.config_map.as_ref().map(|c| pb::ConfigMapVolumeSource {
                local_object_reference: local_name(&c.name),
                items: list(&c.items, key_to_path),
                default_mode: c.default_mode,
                optional: c.optional,
            }),
            secret: v.secret.as_ref().map(|s| pb::SecretVolumeSource {
                secret_name: s.secret_name.clone(),
                items: list(&s.items, key_to_path),
                default_mode: s.default_mode,
                optional: s.optional,
            }),
            projected: v.projected.as_ref().map(|p| pb::ProjectedVolumeSource {
                sources: list(&p.sources, |s| pb::VolumeProjection {
                    service_account_token: s.service_account_token.as_ref().map(|t| {
                        pb::ServiceAccountTokenProjection {
                            audience: t.audience.clone(),
                            expiration_seconds: t.expiration_seconds,
                            path: Some(t.path.clone()),
                        }
                    }),
                    config_map: s.config_map.as_ref().map(|c| pb::ConfigMapProjection {
                        local_object_reference: local_name(&c.name),
                        items: list(&c.items, key_to_path),
                        optional: c.optional,
                    }),
                    downward_api: s.downward_api.as_ref().map(|d| pb::DownwardAPIProjection {
                        items: list(&d.items, |f| pb::DownwardAPIVolumeFile {
                            path: Some(f.path.clone()),
                            field_ref: f.field_ref.as_ref().map(field_ref),
                            mode: f.mode,
                            ..pb::DownwardAPIVolumeFile::default()
                        }),
                    }),
                    ..pb::VolumeProjection::default()
                }),
                default_mode: p.default_mode,
            }),
            ..pb::VolumeSource::default()
        }),
    }
}

/// The status as [`crate::cache::slim_pod`] keeps it.
fn pod_status(s: pb::PodStatus) -> api::PodStatus {
    let containers = |all: Vec<pb::ContainerStatus>| some(all.into_iter().map(container_status).collect());
    api::PodStatus {
        phase: given(s.phase),
        reason: given(s.reason),
        message: given(s.message),
        start_time: s.start_time.and_then(time_from_pb),
        conditions: some(
            s.conditions
                .into_iter()
                .map(|c| api::PodCondition {
                    type_: c.r#type.unwrap_or_default(),
                    status: c.status.unwrap_or_default(),
                    observed_generation: given(c.observed_generation),
                    last_probe_time: c.last_probe_time.and_then(time_from_pb),
                    last_transition_time: c.last_transition_time.and_then(time_from_pb),
                    reason: given(c.reason),
                    message: given(c.message),
                })
                .collect(),
        ),
        container_statuses: containers(s.container_statuses),
        init_container_statuses: containers(s.init_container_statuses),
        ..api::PodStatus::default()
    }
}

fn container_status(s: pb::ContainerStatus) -> api::ContainerStatus {
    api::ContainerStatus {
        name: s.name.unwrap_or_default(),
        state: s.state.map(container_state),
        last_state: s.last_state.map(container_state),
        ready: s.ready.unwrap_or_default(),
        started: s.started,
        restart_count: s.restart_count.unwrap_or_default(),
        ..api::ContainerStatus::default()
    }
}

fn container_state(s: pb::ContainerState) -> api::ContainerState {
    api::ContainerState {
        waiting: s.waiting.map(|w| api::ContainerStateWaiting {
            reason: given(w.reason),
            message: given(w.message),
        }),
        running: s.running.map(|r| api::ContainerStateRunning {
            started_at: r.started_at.and_then(time_from_pb),
        }),
        terminated: s.terminated.map(|t| api::ContainerStateTerminated {
            exit_code: t.exit_code.unwrap_or_default(),
            signal: given(t.signal),
            reason: given(t.reason),
            message: given(t.message),
            started_at: t.started_at.and_then(time_from_pb),
            finished_at: t.finished_at.and_then(time_from_pb),
            container_id: given(t.container_id),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A Kubeflow worker as the API server stores it: the template's fields, kfop's, and the
    /// server's defaults.
    fn worker() -> api::Pod {
        serde_json::from_value(json!({
            "metadata": {
                "name": "pt-worker-0", "namespace": "ns",
                "labels": {"training.kubeflow.org/job-name": "pt"},
                "annotations": {"a": "b"},
                "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                    "name": "pt", "uid": "u", "controller": true, "blockOwnerDeletion": true}]
            },
            "spec": {
                "initContainers": [{"name": "init-pytorch", "image": "alpine:3.10",
                    "command": ["sh", "-c", "until nslookup pt-master-0; do sleep 2; done"],
                    "resources": {"limits": {"cpu": "100m", "memory": "20Mi"}}}],
                "containers": [{"name": "pytorch", "image": "img", "args": ["--epochs=1"],
                    "ports": [{"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}],
                    "env": [{"name": "WORLD_SIZE", "value": "4"},
                            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                    "volumeMounts": [{"name": "kube-api-access-x", "readOnly": true,
                        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}],
                "volumes": [{"name": "kube-api-access-x", "projected": {"defaultMode": 420, "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace",
                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}],
                "restartPolicy": "OnFailure", "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
                "serviceAccountName": "default", "serviceAccount": "default", "securityContext": {},
                "terminationGracePeriodSeconds": 30, "enableServiceLinks": true, "priority": 0,
                "preemptionPolicy": "PreemptLowerPriority",
                "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                    "effect": "NoExecute", "tolerationSeconds": 300}]
            }
        }))
        .unwrap()
    }

    #[test]
    fn a_kubeflow_worker_converts_whole() {
        let pod = worker().to_pb().expect("covered");
        let spec = pod.spec.unwrap();
        let container = &spec.containers[0];
        assert_eq!(container.ports[0].container_port, Some(23456));
        assert_eq!(
            container.env[1]
                .value_from
                .as_ref()
                .unwrap()
                .field_ref
                .as_ref()
                .unwrap()
                .field_path
                .as_deref(),
            Some("metadata.name")
        );
        assert_eq!(
            spec.init_containers[0].resources.as_ref().unwrap().limits["cpu"]
                .string
                .as_deref(),
            Some("100m")
        );
        let projected = spec.volumes[0]
            .volume_source
            .as_ref()
            .unwrap()
            .projected
            .as_ref()
            .unwrap();
        assert_eq!(projected.sources.len(), 3);
        assert_eq!(spec.tolerations[0].toleration_seconds, Some(300));
        assert!(
            spec.security_context.is_some(),
            "an empty securityContext stays one"
        );
        let meta = pod.metadata.unwrap();
        assert_eq!(meta.owner_references[0].block_owner_deletion, Some(true));
    }

    #[test]
    fn a_field_without_conversion_sends_the_object_as_json() {
        let uncovered = [
            ("/spec/affinity", json!({"nodeAffinity": {}})),
            (
                "/spec/containers/0/livenessProbe",
                json!({"exec": {"command": ["true"]}}),
            ),
            (
                "/spec/containers/0/env/0/valueFrom",
                json!({"secretKeyRef": {"name": "s", "key": "k"}}),
            ),
            ("/spec/volumes/0/persistentVolumeClaim", json!({"claimName": "c"})),
            (
                "/spec/securityContext/seccompProfile",
                json!({"type": "RuntimeDefault"}),
            ),
            ("/metadata/managedFields", json!([{"manager": "m"}])),
            ("/status", json!({"phase": "Pending"})),
        ];
        for (path, value) in uncovered {
            let mut json = serde_json::to_value(worker()).unwrap();
            let (parent, field) = path.rsplit_once('/').unwrap();
            json.pointer_mut(parent).unwrap()[field] = value;
            let pod: api::Pod = serde_json::from_value(json).unwrap();
            assert!(pod.to_pb().is_none(), "{path} would be dropped");
        }
    }

    #[test]
    fn metadata_survives_the_trip_and_the_status_keeps_what_the_cache_keeps() {
        let mut meta = worker().metadata;
        meta.uid = Some("u1".into());
        meta.resource_version = Some("7".into());
        meta.creation_timestamp = Some(meta::Time(Timestamp::new(1_700_000_000, 0).unwrap()));
        meta.finalizers = Some(vec!["f".into()]);
        assert_eq!(meta_from_pb(meta_to_pb(&meta)), meta);

        let at = pb_meta::Time {
            seconds: Some(1_700_000_000),
            nanos: Some(0),
        };
        let status = pb::PodStatus {
            phase: Some("Running".into()),
            pod_ip: Some("10.0.0.1".into()),
            qos_class: Some("BestEffort".into()),
            start_time: Some(at),
            conditions: vec![pb::PodCondition {
                r#type: Some("Ready".into()),
                status: Some("True".into()),
                ..pb::PodCondition::default()
            }],
            container_statuses: vec![pb::ContainerStatus {
                name: Some("pytorch".into()),
                ready: Some(true),
                restart_count: Some(2),
                image: Some("img".into()),
                state: Some(pb::ContainerState {
                    terminated: Some(pb::ContainerStateTerminated {
                        exit_code: Some(137),
                        reason: Some("OOMKilled".into()),
                        finished_at: Some(at),
                        ..pb::ContainerStateTerminated::default()
                    }),
                    ..pb::ContainerState::default()
                }),
                ..pb::ContainerStatus::default()
            }],
            ..pb::PodStatus::default()
        };
        let pod = api::Pod::from_pb(pb::Pod {
            status: Some(status),
            ..pb::Pod::default()
        });
        let kept: api::PodStatus = serde_json::from_value(json!({
            "phase": "Running",
            "startTime": "2023-11-14T22:13:20Z",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "pytorch", "ready": true, "restartCount": 2,
                "image": "", "imageID": "",
                "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                    "finishedAt": "2023-11-14T22:13:20Z"}}}]
        }))
        .unwrap();
        assert_eq!(pod.status, Some(kept));
    }

    /// Go writes every non-pointer field to protobuf, JSON leaves empty ones out.
    #[test]
    fn zero_values_read_as_json_leaves_them_out() {
        let pod = api::Pod::from_pb(pb::Pod {
            metadata: Some(pb_meta::ObjectMeta {
                name: Some("p".into()),
                generate_name: Some(String::new()),
                generation: Some(0),
                creation_timestamp: Some(pb_meta::Time::default()),
                ..pb_meta::ObjectMeta::default()
            }),
            status: Some(pb::PodStatus {
                phase: Some("Running".into()),
                reason: Some(String::new()),
                conditions: vec![pb::PodCondition {
                    r#type: Some("Ready".into()),
                    status: Some("True".into()),
                    observed_generation: Some(0),
                    last_probe_time: Some(pb_meta::Time::default()),
                    message: Some(String::new()),
                    ..pb::PodCondition::default()
                }],
                ..pb::PodStatus::default()
            }),
            ..pb::Pod::default()
        });
        let json = serde_json::to_value(&pod).unwrap();
        assert_eq!(
            json,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "status": {"phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}]}})
        );
    }

    #[test]
    fn ports_keep_their_number_or_name() {
        assert_eq!(int_or_string(&IntOrString::Int(80)).int_val, Some(80));
        let named = int_or_string(&IntOrString::String("http".into()));
        assert_eq!((named.r#type, named.str_val.as_deref()), (Some(1), Some("http")));
    }
}
