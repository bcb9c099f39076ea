"""Kubeflow's Python SDK (kubeflow-training 1.8.1) against the kfop all-in-one operator.

Run by tests/sdk.rs, which starts the local control plane and the operator, completes running
pods through kwok, and sets KUBECONFIG and KFOP_SDK_NAMESPACE.
"""
import os

from kubernetes.client import V1Container, V1ContainerPort, V1ObjectMeta, V1PodSpec, V1PodTemplateSpec
from kubeflow.training import (
    KubeflowOrgV1PyTorchJob,
    KubeflowOrgV1PyTorchJobSpec,
    KubeflowOrgV1ReplicaSpec,
    KubeflowOrgV1RunPolicy,
    KubeflowOrgV1TFJob,
    KubeflowOrgV1TFJobSpec,
    TrainingClient,
)

NAMESPACE = os.environ["KFOP_SDK_NAMESPACE"]


def client(kind: str) -> TrainingClient:
    # One client per kind: SDK 1.8.1's wait_for_job_conditions checks the job against the
    # client's default kind.
    return TrainingClient(config_file=os.environ["KUBECONFIG"], namespace=NAMESPACE, job_kind=kind)


def replica(container: str, image: str, port: int, replicas: int, restart_policy: str):
    return KubeflowOrgV1ReplicaSpec(
        replicas=replicas,
        restart_policy=restart_policy,
        template=V1PodTemplateSpec(
            spec=V1PodSpec(
                containers=[
                    V1Container(
                        name=container,
                        image=image,
                        ports=[V1ContainerPort(name=f"{container[:2]}-port", container_port=port)],
                    )
                ]
            )
        ),
    )


def assert_succeeded(c: TrainingClient, name: str):
    """Kubeflow's e2e check: Created and Succeeded, never Running/Restarting/Failed at the end."""
    c.wait_for_job_conditions(name, wait_timeout=120, polling_interval=1)
    assert c.is_job_created(name)
    assert c.is_job_succeeded(name)
    assert not c.is_job_running(name)
    assert not c.is_job_restarting(name)
    assert not c.is_job_failed(name)
    assert len(c.get_job_conditions(name)) >= 2


def test_pytorchjob_lifecycle():
    name, kind = "sdk-pytorch", "PyTorchJob"
    image = "docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727"
    job = KubeflowOrgV1PyTorchJob(
        api_version="kubeflow.org/v1",
        kind=kind,
        metadata=V1ObjectMeta(name=name, namespace=NAMESPACE),
        spec=KubeflowOrgV1PyTorchJobSpec(
            run_policy=KubeflowOrgV1RunPolicy(clean_pod_policy="None"),
            pytorch_replica_specs={
                "Master": replica("pytorch", image, 23456, 1, "OnFailure"),
                "Worker": replica("pytorch", image, 23456, 2, "OnFailure"),
            },
        ),
    )
    c = client(kind)
    c.create_job(job)
    assert_succeeded(c, name)
    fetched = c.get_job(name)
    assert fetched.status.replica_statuses["Master"].succeeded == 1
    pods = sorted(c.get_job_pod_names(name))
    assert pods == ["sdk-pytorch-master-0", "sdk-pytorch-worker-0", "sdk-pytorch-worker-1"]
    assert c.get_job_pod_names(name, is_master=True) == ["sdk-pytorch-master-0"]
    assert name in [j.metadata.name for j in c.list_jobs()]
    c.delete_job(name)


def test_tfjob_lifecycle():
    name, kind = "sdk-tf", "TFJob"
    image = "docker.io/kubeflow/tf-mnist-with-summaries:latest"
    job = KubeflowOrgV1TFJob(
        api_version="kubeflow.org/v1",
        kind=kind,
        metadata=V1ObjectMeta(name=name, namespace=NAMESPACE),
        spec=KubeflowOrgV1TFJobSpec(
            run_policy=KubeflowOrgV1RunPolicy(clean_pod_policy="None"),
            tf_replica_specs={
                "PS": replica("tensorflow", image, 2222, 1, "Never"),
                "Worker": replica("tensorflow", image, 2222, 2, "Never"),
            },
        ),
    )
    c = client(kind)
    c.create_job(job)
    assert_succeeded(c, name)
    pods = sorted(c.get_job_pod_names(name))
    assert pods == ["sdk-tf-ps-0", "sdk-tf-worker-0", "sdk-tf-worker-1"]
    c.delete_job(name)
