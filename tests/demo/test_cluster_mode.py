"""`demo --kubeconfig`: against a cluster (here the in-process API server with the examples
applied and the real adapter aggregated), it checks prerequisites, drives the load generators,
and leaves them as it found them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from autoscaler.demo.cluster import ClusterStage
from autoscaler.demo.processes import Child
from autoscaler.demo.sandbox import StartupError, _wait_ready
from kubesim.apiserver import KubeSim
from kubesim.net import free_port

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FILES = ["namespace.yaml", "web/app.yaml", "web/load.yaml", "web/horizontalautoscaler.yaml",
         "worker/worker.yaml", "worker/producer.yaml", "worker/horizontalautoscaler.yaml"]


@pytest.fixture
def cluster():
    with KubeSim(ready_delay=0.2) as sim:
        for name in FILES:
            for doc in yaml.safe_load_all((EXAMPLES / name).read_text()):
                sim.apply(doc)
        yield sim


def _replicas(sim, name):
    return sim.get("apps/v1", "Deployment", "demo", name)["spec"]["replicas"]


async def test_refuses_a_cluster_without_the_metrics_apis(cluster, tmp_path):
    stage = ClusterStage(cluster.kubeconfig_path, 60, tmp_path, tmp_path)
    with pytest.raises(StartupError, match=r"custom\.metrics\.k8s\.io is not served: install the adapter"):
        await stage.start()
    await stage.stop()
    assert stage.processes() == []


async def test_drives_the_load_generators_and_puts_them_back(cluster, tmp_path):
    producer = cluster.get("apps/v1", "Deployment", "demo", "producer")
    producer["spec"]["replicas"] = 3
    cluster.apply(producer)
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules: []\n")
    port = free_port()
    adapter = Child("adapter", "adapter", ["--insecure", "--port", str(port), "--prometheus-url", "http://127.0.0.1:1",
                                           "--config", str(rules)], tmp_path).start()
    try:
        await _wait_ready(f"http://127.0.0.1:{port}/healthz", adapter, 60, "the adapter")
        for group in ("custom.metrics.k8s.io", "external.metrics.k8s.io"):
            cluster.set_aggregated_api(group, f"http://127.0.0.1:{port}")
        stage = ClusterStage(cluster.kubeconfig_path, 60, tmp_path, tmp_path)
        try:
            await stage.start()
            for _ in range(100):  # the web profile starts at 1 req/s = 2 loaders; the producer's at 1 msg/s = 1
                if (_replicas(cluster, "web-load"), _replicas(cluster, "producer")) == (2, 1):
                    break
                await asyncio.sleep(0.1)
            assert (_replicas(cluster, "web-load"), _replicas(cluster, "producer")) == (2, 1)
            assert [p["name"] for p in stage.processes()] == ["controller"]
            stage.check_alive()
        finally:
            await stage.stop()
        assert (_replicas(cluster, "web-load"), _replicas(cluster, "producer")) == (1, 3)
        assert not stage.children[0].running()
    finally:
        adapter.stop()
