"""The controller's /metrics, read by Prometheus' own text parser: per-autoscaler series named and
labelled like kube-state-metrics' HPA series, client-go's workqueue series, build info, errors by
reason; no `_created` series and no declared family without a sample."""

from __future__ import annotations

import asyncio

from prometheus_client.parser import text_string_to_metric_families

from ..manifests.monitoring import used_names
from .conftest import NS, autoscaler, deployment, eventually, external_metric, pods_metric, replicas, status
from .test_leader_http import serving
from .test_reconcile import per_pod

AS = {"kind": "HorizontalAutoscaler", "namespace": NS, "horizontalautoscaler": "web"}


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        out.setdefault(family.name, [])
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def value(found, metric: str, /, **labels: str) -> float:
    matches = [v for lab, v in found.get(metric, []) if labels.items() <= lab.items()]
    assert len(matches) == 1, (metric, labels, found.get(metric))
    return matches[0]


async def test_controller_metrics(sim, fake):
    sim.apply(deployment("web", 2))
    fake.pods[(NS, "http_requests")] = per_pod(2000)
    fake.external[(NS, "queue_messages_ready")] = [({}, "12")]
    metrics = [pods_metric("http_requests", "500m"), external_metric("queue_messages_ready", "30")]
    sim.apply(autoscaler("web", "web", metrics, min_replicas=2, max_replicas=3))
    sim.apply(autoscaler("orphan", "missing", [pods_metric("http_requests", "500m")]))  # FailedGetScale every sync
    async with serving(sim) as (_, client):
        await eventually(lambda: replicas(sim, "web") == 3 and status(sim, "web").get("currentReplicas") == 3)

        deadline = asyncio.get_running_loop().time() + 15
        while True:  # scrape until the failing autoscaler's error is counted (or the deadline)
            text = (await client.get("/metrics")).text
            found = samples(text)
            errors = found.get("promscaler_autoscaler_reconcile_errors_total", [])
            if any(lab.get("reason") == "FailedGetScale" for lab, _ in errors):
                break
            assert asyncio.get_running_loop().time() < deadline, text
            await asyncio.sleep(0.05)
    assert "_created" not in text
    p = "promscaler_horizontalautoscaler_"
    assert value(found, p + "spec_min_replicas", **AS) == 2
    assert value(found, p + "spec_max_replicas", **AS) == 3
    assert value(found, p + "status_current_replicas", **AS) == 3
    assert value(found, p + "status_desired_replicas", **AS) == 3  # wants 4 (2000m / 500m), held at max 3
    assert value(found, p + "spec_target_metric", **AS, metric_name="http_requests",
                 metric_target_type="average") == 0.5
    assert value(found, p + "spec_target_metric", **AS, metric_name="queue_messages_ready",
                 metric_target_type="average") == 30
    # 2000m over 3 pods = 667m per pod (rounded up to the milli-unit); queue 12 over 3 replicas = 4
    assert value(found, p + "status_target_metric", **AS, metric_name="http_requests",
                 metric_target_type="average") == 0.667
    assert value(found, p + "status_target_metric", **AS, metric_name="queue_messages_ready",
                 metric_target_type="average") == 4
    assert value(found, p + "status_condition", **AS, condition="ScalingLimited", status="true") == 1
    assert value(found, p + "status_condition", **AS, condition="ScalingLimited", status="false") == 0
    assert value(found, p + "status_scaling_limited", **AS, reason="TooManyReplicas") == 1
    assert value(found, p + "status_last_scale_time_seconds", **AS) > 1.7e9
    assert value(found, "promscaler_autoscaler_reconcile_errors_total", kind="HorizontalAutoscaler",
                 reason="FailedGetScale") >= 1
    assert value(found, "workqueue_adds_total", name="horizontalautoscalers") >= 2
    assert value(found, "workqueue_retries_total", name="horizontalautoscalers") >= 1
    assert value(found, "workqueue_queue_duration_seconds_count", name="horizontalautoscalers") >= 2
    assert value(found, "workqueue_work_duration_seconds_count", name="horizontalautoscalers") >= 2
    assert "workqueue_depth" in found
    assert value(found, "promscaler_build_info", component="autoscaler") == 1
    assert value(found, "promscaler_autoscaler_reconcile_duration_seconds_count") >= 2
    # every controller series the chart's alerts and dashboard read is exported
    shipped = {n for n in used_names() if n.startswith(("promscaler_autoscaler_", "promscaler_horizontalautoscaler_",
                                                          "workqueue_"))}
    assert len(shipped) >= 10 and shipped <= set(found), shipped - set(found)
    empty = [f.name for f in text_string_to_metric_families(text) if not f.samples]
    assert not empty, f"declared but never sampled: {empty}"


def test_series_leave_with_the_autoscaler():
    from autoscaler.controller.http import Telemetry
    t = Telemetry()
    key = ("HorizontalAutoscaler", NS, "web")
    spec = {"minReplicas": 1, "maxReplicas": 5, "metrics": [pods_metric("r", "1")]}
    t.status(key, spec, {"currentReplicas": 1, "desiredReplicas": 1,
                         "currentMetrics": [{"type": "Pods", "pods": {"current": {"averageValue": "2"}}}]})
    assert t.registry.get_sample_value("promscaler_horizontalautoscaler_status_target_metric",
                                       {**AS, "metric_name": "r", "metric_target_type": "average"}) == 2
    t.status(key, {**spec, "metrics": [pods_metric("s", "1")]}, {"currentReplicas": 1})  # metric renamed
    assert t.registry.get_sample_value("promscaler_horizontalautoscaler_spec_target_metric",
                                       {**AS, "metric_name": "r", "metric_target_type": "average"}) is None
    t.forget(key)
    assert t.registry.get_sample_value("promscaler_horizontalautoscaler_spec_max_replicas", AS) is None

