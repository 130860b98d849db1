"""A known history for the backtest tests, 15 s apart (OpenMetrics text for `promtool` backfill).

`inflight_requests` is a per-pod gauge (so every value the replay sees is exact): a steady
start, a ramp, a spike, a fall, a second spike and a fall. Two pods of Deployment `web` run
throughout, two of a new ReplicaSet of it join at step 8 (the pods are counted, so the observed
total is their sum). Pods of Deployment `web-canary` (whose names start `web-` too), of another
Deployment (`api`) and of another namespace are there to be left out, and kube-state-metrics'
`kube_deployment_status_replicas` says what the cluster ran.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kubesim.adapterrules import gauge_rule

STEP = 15
STEPS = 24
NS = "shop"
# per-pod value at each step, for the pods present at that step
PER_POD = [10] * 4 + [20] * 4 + [20] * 2 + [2.5] * 4 + [20] * 2 + [2.5] * 8
assert len(PER_POD) == STEPS
QUEUE = [60] * 12 + [150] * 12  # messages ready in queue "orders" (External metric)


def pods_at(i: int) -> list[str]:
    return ["web-7c9d8f6b5-x2x7z", "web-7c9d8f6b5-b4kqp"] + (["web-59dbf8c7f4-m6n2s", "web-59dbf8c7f4-qz8wt"]
                                                           if i >= 8 else [])


CANARY = ["web-canary-6f8b9d7c5-p2x4k", "web-canary-6f8b9d7c5-s7v9w"]  # Deployment web-canary: not web's


def totals() -> list[float]:
    """The observed total at each step: what the load model spreads over the simulated pods."""
    return [PER_POD[i] * len(pods_at(i)) for i in range(STEPS)]


DEPLOYMENT_PODS = ["web-7c9d8f6b5-x2x7z", "web-7c9d8f6b5-b4kqp"]  # two pods of Deployment web


def gauge(name: str, start: int, minutes: int, value: Callable[[int], float], step: int = STEP,
          pods: Sequence[str] = DEPLOYMENT_PODS) -> list[str]:
    """OpenMetrics lines of a per-pod gauge in namespace NS: `value(seconds since start)` for
    each pod, every `step` for `minutes`, both ends included."""
    lines = [f"# TYPE {name} gauge"]
    for i in range(minutes * 60 // step + 1):
        lines += [f'{name}{{namespace="{NS}",pod="{pod}"}} {value(i * step)} {start + i * step}' for pod in pods]
    return lines


def openmetrics(start: int) -> str:
    lines = ["# TYPE inflight_requests gauge"]
    for i in range(STEPS):
        t = start + i * STEP
        for pod in pods_at(i):
            lines.append(f'inflight_requests{{namespace="{NS}",pod="{pod}"}} {PER_POD[i]} {t}')
        for pod in CANARY:
            lines.append(f'inflight_requests{{namespace="{NS}",pod="{pod}"}} 300 {t}')
        lines.append(f'inflight_requests{{namespace="{NS}",pod="api-6d5f7b9c8-k2m4n"}} 500 {t}')
        lines.append(f'inflight_requests{{namespace="other",pod="web-7c9d8f6b5-zzzzz"}} 500 {t}')
    lines.append("# TYPE queue_messages_ready gauge")
    for i in range(STEPS):
        t = start + i * STEP
        lines.append(f'queue_messages_ready{{namespace="{NS}",queue="orders"}} {QUEUE[i]} {t}')
        lines.append(f'queue_messages_ready{{namespace="{NS}",queue="other"}} 999 {t}')
    lines.append("# TYPE kube_deployment_status_replicas gauge")
    for i in range(STEPS):
        lines.append(f'kube_deployment_status_replicas{{namespace="{NS}",deployment="web"}} '
                     f"{len(pods_at(i))} {start + i * STEP}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


RULES = {
    "rules": [gauge_rule('inflight_requests{namespace!="",pod!=""}')],
    "externalRules": [gauge_rule('queue_messages_ready{queue!=""}', ("namespace",))],
}

QUEUE_METRIC = {"type": "External", "external": {
    "metric": {"name": "queue_messages_ready", "selector": {"matchLabels": {"queue": "orders"}}},
    "target": {"type": "AverageValue", "averageValue": "30"}}}


def spec(name: str, down_window: int, metric: dict | None = None, target: str = "web", min_replicas: int = 1) -> dict:
    """Target 10 per pod; scale up by max(4 pods, 100%) per 15 s, down by 100% per 15 s after `down_window`."""
    return {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
            "minReplicas": min_replicas, "maxReplicas": 10,
            "metrics": [metric or {"type": "Pods", "pods": {"metric": {"name": "inflight_requests"},
                                                            "target": {"type": "AverageValue", "averageValue": "10"}}}],
            "behavior": {
                "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                            "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                                         {"type": "Percent", "value": 100, "periodSeconds": 15}]},
                "scaleDown": {"stabilizationWindowSeconds": down_window,
                              "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]},
            },
        },
    }
