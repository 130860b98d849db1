"""Real parts for metrics.k8s.io: a real Prometheus backfilled with cAdvisor- and node-exporter-
shaped series, kubesim holding the pods and nodes, and the real adapter process (connected to
kubesim, serving prometheus-adapter's default `resourceRules`) aggregated behind kubesim as
`metrics.k8s.io`, as an APIService would route it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from kubesim.apiserver import KubeSim
from kubesim.processes import AdapterProcess
from kubesim.prometheus import PrometheusServer, start_backfilled
from kubesim.resourceseries import DEFAULT_RESOURCE_RULES, Container, NodeSeries, PodSeries, openmetrics

ROOT = Path(__file__).resolve().parents[2]
MiB = 1024 * 1024

# CPU rates end in half a milli-core, so truncation (not rounding up) shows in every value.
# (namespace, name, phase or None for "not in the cluster", containers in Prometheus)
PODS: list[tuple[str, str, str | None, tuple[Container, ...]]] = [
    ("web", "web-1", "Running", (Container("app", 0.2505, 200 * MiB), Container("sidecar", 0.0505, 64 * MiB))),
    ("web", "web-2", "Running", (Container("app", 1.5005, 100_000_000),)),  # memory not a multiple of 1024
    ("web", "web-partial", "Running", (Container("app", 0.3005, 50 * MiB), Container("extra", 0.1005, None))),
    ("web", "web-cpuonly", "Running", (Container("app", 0.2, None),)),  # no memory series at all
    ("web", "web-done", "Succeeded", (Container("app", 0.7, 10 * MiB),)),  # finished; Prometheus still has it
    ("web", "web-pending", "Pending", (Container("app", 0.7, 10 * MiB),)),  # not started (stale series)
    ("web", "web-gone", None, (Container("app", 0.9, 30 * MiB),)),  # deleted from the cluster
    ("web", "web-nodata", "Running", ()),  # exists, no samples
    ("shop", "shop-1", "Running", (Container("app", 2.0005, 1024 * MiB),)),
    ("shop", "web-1", "Running", (Container("app", 0.1255, 32 * MiB),)),  # same name, other namespace
]
# Busy cores half a milli-core off a whole one, as the pods' are: a rate that lands on a whole
# milli-core (0.75) reads 0.7499999... at some instants, and kubectl prints the truncated milli-cores.
NODES: list[tuple[str, bool, NodeSeries | None]] = [
    ("node-1", True, NodeSeries("node-1", {"user": 0.5, "system": 0.2505}, 3.0, 16 * 1024**3, 10 * 1024**3)),
    ("node-2", True, NodeSeries("node-2", {"user": 1.25, "system": 0.1255}, 1.0, 8 * 1024**3, 7_000_000_000)),
    ("node-ghost", False, NodeSeries("node-ghost")),  # Prometheus only
    ("node-3", True, None),  # in the cluster, no samples
]


# Containers the pod spec lists where they differ from Prometheus' (served as Prometheus has them).
SPEC_CONTAINERS = {("web", "web-2"): ["app", "idle"], ("shop", "web-1"): ["main"]}


def pod_object(namespace: str, name: str, phase: str, containers: tuple[Container, ...]) -> dict[str, Any]:
    names = SPEC_CONTAINERS.get((namespace, name)) or [c.name for c in containers] or ["app"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": name.rsplit("-", 1)[0], "pod": name}},
            "spec": {"nodeName": "node-1", "containers": [{"name": n, "image": "busybox"} for n in names]},
            "status": {"phase": phase}}


class PromQL:
    """Asks Prometheus directly: the independent source of expected values."""

    def __init__(self, url: str) -> None:
        self.url = url

    def vector(self, expr: str) -> list[tuple[dict[str, str], float, float]]:
        body = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10).json()
        assert body["status"] == "success", body
        return [(r["metric"], float(r["value"][0]), float(r["value"][1])) for r in body["data"]["result"]]


@pytest.fixture(scope="module")
def prometheus() -> Iterator[PrometheusServer]:
    pods = [PodSeries(ns, name, containers) for ns, name, _, containers in PODS if containers]
    prom = start_backfilled(openmetrics(pods, [n for _, _, n in NODES if n is not None]))
    yield prom
    prom.close()


@pytest.fixture(scope="module")
def promql(prometheus: PrometheusServer) -> PromQL:
    return PromQL(prometheus.url)


@pytest.fixture(scope="module")
def cluster(prometheus: PrometheusServer) -> Iterator[tuple[KubeSim, AdapterProcess]]:
    """kubesim with the pods and nodes, and the adapter aggregated as metrics.k8s.io."""
    with KubeSim(ready_delay=0.0) as sim:
        for ns in ("web", "shop"):
            sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for ns, name, phase, containers in PODS:
            if phase is not None:
                sim.apply(pod_object(ns, name, phase, containers))
        for name, exists, _ in NODES:
            if exists:
                sim.apply({"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "pool": name[-1]}},
                           "status": {"allocatable": {"cpu": "4", "memory": "16Gi"},
                                      "capacity": {"cpu": "4", "memory": "16Gi"}}})
        rules = Path(prometheus.dir) / "resource-rules.yaml"
        rules.write_text(yaml.safe_dump({"resourceRules": DEFAULT_RESOURCE_RULES}))
        adapter = AdapterProcess("--prometheus-url", prometheus.url, "--config", str(rules),
                                 "--kubeconfig", sim.kubeconfig_path).wait_ready()
        try:
            sim.set_aggregated_api("metrics.k8s.io", adapter.url)
            yield sim, adapter
        finally:
            sim.set_aggregated_api("metrics.k8s.io", None)
            adapter.stop()


@pytest.fixture(scope="module")
def sim(cluster: tuple[KubeSim, AdapterProcess]) -> KubeSim:
    return cluster[0]


@pytest.fixture(scope="module")
def adapter(cluster: tuple[KubeSim, AdapterProcess]) -> AdapterProcess:
    return cluster[1]
