"""Known series for the adapter tests, as OpenMetrics text for `promtool` backfill.

Samples every 15s from 30 minutes ago to 30 minutes ahead, so an instant query at any moment of
the test run sees fresh data; counters grow linearly so their rates are known constants.
"""

from __future__ import annotations

import time

STEP = 15
# (labels, per-second rate) for counters; (labels, value) for gauges
COUNTERS: dict[str, list[tuple[dict[str, str], float]]] = {
    "http_requests_total": [
        ({"namespace": "web", "pod": "web-1", "method": "GET"}, 1.0),
        ({"namespace": "web", "pod": "web-1", "method": "POST"}, 0.5),
        ({"namespace": "web", "pod": "web-2", "method": "GET"}, 2.5),
        ({"namespace": "web", "pod": "web-3", "method": "GET"}, 0.25),
        ({"namespace": "web", "pod": "web-old", "method": "GET"}, 9.0),  # a pod deleted moments ago
        ({"namespace": "shop", "pod": "shop-1", "method": "GET"}, 4.0),
    ],
    "jobs_processed_total": [({"namespace": "batch", "pod": "worker-1"}, 3.0)],
    "jobs_failed_total": [({"namespace": "batch", "pod": "worker-1"}, 0.2)],
    "jobs_processed_seconds_total": [({"namespace": "batch", "pod": "worker-1"}, 0.75)],
}
GAUGES: dict[str, list[tuple[dict[str, str], float]]] = {
    "queue_messages_ready": [
        ({"namespace": "web", "queue": "orders"}, 42),
        ({"namespace": "web", "queue": "payments"}, 7),
        ({"namespace": "shop", "queue": "orders"}, 100),
    ],
    "cluster_queue_depth": [({"queue": "global", "region": "eu"}, 12), ({"queue": "global", "region": "us"}, 30)],
    "node_load": [({"node": "node-1"}, 1.25), ({"node": "node-2"}, 0.5)],
    "namespace_quota_used": [({"namespace": "web"}, 3), ({"namespace": "shop"}, 1536)],
    "deployment_queue_depth": [({"namespace": "web", "kube_apps_deployment": "frontend"}, 12.5)],
}


def _labels(d: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(d.items())) + "}"


def openmetrics(now: float | None = None) -> str:
    now = int(now or time.time())
    start, end = now - 1800, now + 1800
    lines: list[str] = []
    for name, series in COUNTERS.items():
        family = name.removesuffix("_total")
        lines.append(f"# TYPE {family} counter")
        for labels, rate in series:
            for t in range(start, end + 1, STEP):
                lines.append(f"{name}{_labels(labels)} {1000 + rate * (t - start)} {t}")
    for name, series in GAUGES.items():
        lines.append(f"# TYPE {name} gauge")
        for labels, value in series:
            for t in range(start, end + 1, STEP):
                lines.append(f"{name}{_labels(labels)} {value} {t}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"
