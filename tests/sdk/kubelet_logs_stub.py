"""A pytest plugin standing in for the one kubelet feature kwok does not serve: pod logs.

Kubeflow's SDK e2e suites print each job's logs (`TrainingClient.get_job_logs`), which the API
server fetches from the pod's kubelet; kwok nodes have none. Every other call goes to the real
API server, so the suites run unchanged.
"""
import kubernetes.client


def _no_logs(self, name, namespace, **kwargs):
    return ""


kubernetes.client.CoreV1Api.read_namespaced_pod_log = _no_logs
