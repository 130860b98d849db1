"""Series shaped like the kubelet's cAdvisor and node-exporter export them, as OpenMetrics text
for `promtool` backfill: what prometheus-adapter's `resourceRules` read to serve metrics.k8s.io.

cAdvisor: `container_cpu_usage_seconds_total` (counter) and `container_memory_working_set_bytes`
(gauge) per container with `namespace`, `pod`, `container`, plus the pod's own cgroup with
`container=""` (which the rules exclude). node-exporter: `node_cpu_seconds_total` per cpu and
mode, `node_memory_MemTotal_bytes`, `node_memory_MemAvailable_bytes`, with `job="node-exporter"`,
`instance` and `node`. Counters grow linearly, so their rates are known; the tests still take
expected values from Prometheus.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["DEFAULT_RESOURCE_RULES", "Container", "NodeSeries", "PodSeries", "openmetrics", "resource_rules"]

def resource_rules(window: str = "3m") -> dict:
    """prometheus-adapter's chart `rules.resource` section, as users carry it over; `window` is
    the rate range and the served window (the chart's 3m; tests that scale in seconds pass less)."""
    return {
        "cpu": {
            "containerQuery": 'sum by (<<.GroupBy>>) (rate(container_cpu_usage_seconds_total{<<.LabelMatchers>>,'
                              f'container!="",pod!=""}}[{window}]))',
            "nodeQuery": 'sum by (<<.GroupBy>>) (rate(node_cpu_seconds_total{<<.LabelMatchers>>,mode!="idle",'
                         f'mode!="iowait",mode!="steal"}}[{window}]))',
            "resources": {"overrides": {"node": {"resource": "node"}, "namespace": {"resource": "namespace"},
                                        "pod": {"resource": "pod"}}},
            "containerLabel": "container",
        },
        "memory": {
            "containerQuery": 'sum by (<<.GroupBy>>) (container_memory_working_set_bytes{<<.LabelMatchers>>,'
                              'container!="",pod!=""})',
            "nodeQuery": 'sum by (<<.GroupBy>>) (node_memory_MemTotal_bytes{job="node-exporter",<<.LabelMatchers>>}'
                         ' - node_memory_MemAvailable_bytes{job="node-exporter",<<.LabelMatchers>>})',
            "resources": {"overrides": {"instance": {"resource": "node"}, "namespace": {"resource": "namespace"},
                                        "pod": {"resource": "pod"}}},
            "containerLabel": "container",
        },
        "window": window,
    }


DEFAULT_RESOURCE_RULES = resource_rules()


@dataclass(frozen=True)
class Container:
    name: str
    cpu: float | None  # cores (the counter's rate); None: no CPU series
    memory: float | None  # bytes; None: no memory series


@dataclass(frozen=True)
class PodSeries:
    namespace: str
    name: str
    containers: tuple[Container, ...]
    node: str = "node-1"


@dataclass(frozen=True)
class NodeSeries:
    name: str
    busy: dict[str, float] = field(default_factory=lambda: {"user": 0.5, "system": 0.25})  # cores per mode
    idle: float = 3.0  # idle (and iowait/steal, which the rules leave out) cores
    mem_total: int = 16 * 1024**3
    mem_available: int = 10 * 1024**3
    cpus: int = 2


def _labels(d: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(d.items())) + "}"


def openmetrics(pods: Iterable[PodSeries], nodes: Iterable[NodeSeries], now: float | None = None,
                span: int = 1200, step: int = 15) -> str:
    """Samples every `step` seconds from `span` seconds ago to `span` ahead (an instant query at
    any moment of a test run sees fresh data)."""
    end_at = int(now or time.time())
    times = range(end_at - span, end_at + span + 1, step)
    start = times[0]
    cpu, mem, node_cpu, node_mem = [], [], [], []
    for p in pods:
        base = {"namespace": p.namespace, "pod": p.name, "node": p.node, "instance": p.node}
        total_cpu = sum(c.cpu or 0.0 for c in p.containers) + 0.001
        total_mem = sum(c.memory or 0 for c in p.containers) + 4096
        rows = [(c.name, c.cpu, c.memory) for c in p.containers] + [("", total_cpu, total_mem)]
        for name, rate, bytes_ in rows:
            labels = _labels({**base, "container": name})
            if rate is not None:
                cpu += [f"container_cpu_usage_seconds_total{labels} {100 + rate * (t - start):.6f} {t}" for t in times]
            if bytes_ is not None:
                mem += [f"container_memory_working_set_bytes{labels} {bytes_} {t}" for t in times]
    for n in nodes:
        base = {"job": "node-exporter", "instance": n.name, "node": n.name}
        modes = {**n.busy, "idle": n.idle * 0.8, "iowait": n.idle * 0.1, "steal": n.idle * 0.1}
        for i in range(n.cpus):
            for mode, cores in modes.items():
                labels = _labels({**base, "cpu": str(i), "mode": mode})
                node_cpu += [f"node_cpu_seconds_total{labels} {1000 + cores / n.cpus * (t - start):.6f} {t}"
                             for t in times]
        for metric, value in (("node_memory_MemTotal_bytes", n.mem_total),
                              ("node_memory_MemAvailable_bytes", n.mem_available)):
            node_mem += [f"{metric}{_labels(base)} {value} {t}" for t in times]
    lines = ["# TYPE container_cpu_usage_seconds counter", *cpu,
             "# TYPE container_memory_working_set_bytes gauge", *mem,
             "# TYPE node_cpu_seconds counter", *node_cpu]
    by_metric: dict[str, list[str]] = {}
    for line in node_mem:
        by_metric.setdefault(line.split("{", 1)[0], []).append(line)
    for metric, samples in by_metric.items():
        lines += [f"# TYPE {metric} gauge", *samples]
    lines.append("# EOF")
    return "\n".join(lines) + "\n"
