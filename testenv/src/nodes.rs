//! Fake nodes that kwok keeps Ready and the scheduler binds pods to.
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::{Error, Result};

/// How many kwok nodes to register and what each offers.
#[derive(Debug, Clone)]
pub struct NodeShape {
    pub count: usize,
    pub cpu: String,
    pub memory: String,
    pub pods: String,
    pub gpus: String,
    /// Real nodes report their disk; pods that request some (training-operator's MPIJob v1
    /// launcher asks 5Gi) stay unschedulable on a node without it.
    pub ephemeral_storage: String,
}

impl Default for NodeShape {
    fn default() -> Self {
        Self {
            count: 4,
            cpu: "64".to_owned(),
            memory: "512Gi".to_owned(),
            pods: "1000".to_owned(),
            gpus: "8".to_owned(),
            ephemeral_storage: "1Ti".to_owned(),
        }
    }
}

impl NodeShape {
    pub fn name(index: usize) -> String {
        format!("kwok-node-{index}")
    }

    /// Creates the nodes (an existing one is kept) and sets their capacity through the status
    /// subresource, which node creation may reset.
    pub(crate) async fn register(&self, client: &Client) -> Result<()> {
        let api: Api<Node> = Api::all(client.clone());
        let resources = json!({
            "cpu": self.cpu, "memory": self.memory, "pods": self.pods, "nvidia.com/gpu": self.gpus,
            "ephemeral-storage": self.ephemeral_storage,
        });
        for index in 0..self.count {
            let name = Self::name(index);
            let node: Node = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": { "kwok.x-k8s.io/node": "fake" },
                    "labels": {
                        "type": "kwok", "kubernetes.io/hostname": name,
                        "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                    },
                },
            }))
            .map_err(|e| Error::Startup(format!("node object: {e}")))?;
            match api.create(&PostParams::default(), &node).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(Error::kube(format!("creating node {name}"))(e)),
            }
            let status = json!({ "status": { "capacity": resources, "allocatable": resources } });
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await
                .map_err(Error::kube(format!("setting capacity of node {name}")))?;
        }
        Ok(())
    }
}

/// True when every listed node has condition Ready=True.
pub(crate) async fn all_ready(client: &Client, count: usize) -> Result<bool> {
    let api: Api<Node> = Api::all(client.clone());
    let nodes = api
        .list(&Default::default())
        .await
        .map_err(Error::kube("listing nodes"))?;
    let ready = nodes
        .items
        .iter()
        .filter(|n| {
            n.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .count();
    Ok(ready >= count)
}
