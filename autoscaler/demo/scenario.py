"""What the demo runs: two workloads, their autoscalers, the adapter's rules, and the
compressed timings that make a whole scale-up and scale-down fit in about two minutes.

Pure data: the sandbox applies these objects to the in-process cluster, the view states the
timings on screen, and `examples/` holds the same autoscalers at real-cluster timings.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from promscaler.times import format_duration, parse_duration

NAMESPACE = "demo"
AUTOSCALER_API = "promscaler.io/v1alpha1"
AUTOSCALER_KIND = "HorizontalAutoscaler"


@dataclass(frozen=True, slots=True)
class Timings:
    """Every knob that is compressed relative to a real cluster, in seconds."""

    scrape_interval: float = 1.0        # Prometheus (real clusters: 15s-30s)
    rate_window: float = 10.0           # rate(...[10s]) in the rules (real: 1m-2m)
    relist_interval: float = 5.0        # adapter --metrics-relist-interval (default 10m)
    sync_period: float = 3.0            # --horizontal-pod-autoscaler-sync-period (default 15s)
    downscale_stabilization: float = 15.0  # --horizontal-pod-autoscaler-downscale-stabilization (default 5m)
    worker_scale_down_window: float = 10.0  # worker's behavior.scaleDown.stabilizationWindowSeconds
    worker_scale_down_pods: int = 2     # worker's scale-down policy: at most this many pods ...
    worker_scale_down_period: float = 10.0  # ... per this many seconds
    pod_ready_delay: float = 2.0        # the sandbox's deployment controller: pod start -> Ready
    tolerance: float = 0.1              # --horizontal-pod-autoscaler-tolerance (default, unchanged)

    def scaled(self, factor: float) -> Timings:
        """Every duration divided by `factor` (rounded to what the flags can spell): the same demo, faster."""
        if factor == 1:
            return self

        def shrink(seconds: float) -> float:
            return parse_duration(format_duration(seconds / factor))

        changes: dict[str, Any] = {name: shrink(getattr(self, name)) for name in _DURATIONS}
        return replace(self, **changes)

    @property
    def web_recovery(self) -> float:
        """Seconds from the web load's last fall until web is back at minReplicas and settled, with a
        margin for a loaded machine: the rate window empties, the downscale stabilization passes, a
        sync or two, then three samples within tolerance."""
        return 1.2 * (self.rate_window + self.downscale_stabilization + 3 * self.sync_period
                      + self.pod_ready_delay + 3)

    @property
    def worker_recovery(self) -> float:
        """The same for worker: the queue drains, the scale-down window passes, and the policy's
        steps (2 pods per period) bring the peak back to one."""
        drain = 1.5 * self.worker_scale_down_period
        return 1.1 * (drain + self.worker_scale_down_window + 2 * self.worker_scale_down_period
                      + 3 * self.sync_period + 3)

    def lines(self) -> list[str]:
        f = format_duration
        return [
            f"Prometheus scrapes every {f(self.scrape_interval)}; rules use rate(...[{f(self.rate_window)}]); "
            f"adapter relists series every {f(self.relist_interval)}",
            f"controller: sync period {f(self.sync_period)}, "
            f"downscale stabilization {f(self.downscale_stabilization)}, "
            f"tolerance {self.tolerance:g}; pods become Ready {f(self.pod_ready_delay)} after creation",
            f"worker scale-down: stabilization {f(self.worker_scale_down_window)}, at most "
            f"{self.worker_scale_down_pods} pods per {f(self.worker_scale_down_period)}",
        ]


_DURATIONS = ("scrape_interval", "rate_window", "relist_interval", "sync_period", "downscale_stabilization",
              "worker_scale_down_window", "worker_scale_down_period", "pod_ready_delay")


@dataclass(frozen=True, slots=True)
class Workload:
    """One used-by case: what the view and the report need to know about it."""

    name: str
    title: str
    load_unit: str          # what the load profile counts
    load_short: str         # the same, for a narrow column
    metric: str             # the metric's name as the autoscaler asks for it
    metric_type: str        # Pods | External
    target: float           # per-pod AverageValue target, in the metric's unit
    target_text: str        # the target as written in the spec
    initial_replicas: int
    min_replicas: int
    max_replicas: int


WEB = Workload("web", "web: Pods metric http_requests", "requests/s", "req/s", "http_requests", "Pods", 0.5, "500m",
               initial_replicas=2, min_replicas=1, max_replicas=10)
WORKER = Workload("worker", "worker: External metric queue_messages_ready", "messages/s produced",
                  "msg/s in", "queue_messages_ready", "External", 30.0, "30", initial_replicas=1, min_replicas=1,
                  max_replicas=10)
WORKLOADS = (WEB, WORKER)
QUEUE = "worker_tasks"


def namespace() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}


def deployment(w: Workload) -> dict[str, Any]:
    labels = {"app": w.name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": w.name, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "replicas": w.initial_replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels},
                         "spec": {"containers": [{"name": "app", "image": f"promscaler/sim-{w.name}"}]}},
        },
    }


def autoscaler(w: Workload, timings: Timings) -> dict[str, Any]:
    if w.metric_type == "Pods":
        metric = {"type": "Pods", "pods": {"metric": {"name": w.metric},
                                           "target": {"type": "AverageValue", "averageValue": w.target_text}}}
    else:
        metric = {"type": "External", "external": {
            "metric": {"name": w.metric, "selector": {"matchLabels": {"queue": QUEUE}}},
            "target": {"type": "AverageValue", "averageValue": w.target_text}}}
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": w.name},
        "minReplicas": w.min_replicas, "maxReplicas": w.max_replicas, "metrics": [metric],
    }
    if w is WORKER:
        spec["behavior"] = {"scaleDown": {
            "stabilizationWindowSeconds": int(timings.worker_scale_down_window),
            "policies": [{"type": "Pods", "value": timings.worker_scale_down_pods,
                          "periodSeconds": int(timings.worker_scale_down_period)}]}}
    return {"apiVersion": AUTOSCALER_API, "kind": AUTOSCALER_KIND,
            "metadata": {"name": w.name, "namespace": NAMESPACE}, "spec": spec}


def adapter_rules(timings: Timings) -> dict[str, Any]:
    """prometheus-adapter rules: per-pod request rate from the counter, and the queue length."""
    window = format_duration(timings.rate_window)
    return {
        "rules": [{
            "seriesQuery": 'http_requests_total{namespace!="",pod!=""}',
            "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
            "name": {"matches": "^(.*)_total$", "as": "${1}"},
            "metricsQuery": f"sum(rate(<<.Series>>{{<<.LabelMatchers>>}}[{window}])) by (<<.GroupBy>>)",
        }],
        "externalRules": [{
            "seriesQuery": 'queue_messages_ready{queue!=""}',
            "resources": {"overrides": {"namespace": {"resource": "namespace"}}},
            # keep the queue label: each answer says which queue it counts
            "metricsQuery": "sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)",
        }],
    }
