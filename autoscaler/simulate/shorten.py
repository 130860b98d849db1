"""Writing a scenario in the short form (`short_form`): pods by count, metric values by name.

For tools that capture a live autoscaler as a scenario (`explain --capture`): the full objects
become `pods: {count, ready, cpuRequest, memoryRequest}` and one value per pod (or a total) per
spec metric. The short form cannot say everything (pod names, start times, several containers),
so the result is decided both ways and the short form is returned only when the decision is the
same; otherwise the full document comes back unchanged.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from promscaler.quantity import format_milli

from ..decision import Decision, ExternalReading, MetricFailure, ObjectReading, PodInfo, PodReading, decide
from .output import decision_json
from .scenario import build_scenario

__all__ = ["short_form"]

_SAME = ("desiredReplicas", "recommendation", "scale", "currentMetrics", "proposals", "conditions")


def _short_pods(pods: tuple[PodInfo, ...]) -> tuple[dict[str, Any], list[PodInfo]] | None:
    """`pods:` in the short form and the pods in its order (Ready first), or None when they differ
    in a way it cannot say (several containers, different requests, not Running, being deleted)."""
    requests = {tuple(sorted(next(iter(p.requests.values()), {}).items())) for p in pods}
    if len(requests) > 1 or any(p.phase != "Running" or p.deleted or len(p.requests) != 1 or p.pod_requests
                                for p in pods):
        return None
    ordered = sorted(pods, key=lambda p: p.ready_condition != "True")
    short: dict[str, Any] = {"count": len(pods), "ready": sum(p.ready_condition == "True" for p in pods)}
    for resource, key in (("cpu", "cpuRequest"), ("memory", "memoryRequest")):
        value = dict(next(iter(requests), ())).get(resource)
        if value is not None:
            short[key] = format_milli(value)
    return short, ordered


def _values(reading: Any, pods: list[PodInfo]) -> Any:
    if isinstance(reading, PodReading):
        return [None if p.name not in reading.samples else format_milli(reading.samples[p.name].milli) for p in pods]
    if isinstance(reading, ObjectReading):
        return format_milli(reading.milli)
    if isinstance(reading, ExternalReading):
        values = [format_milli(v) for v in reading.millis]
        return values[0] if len(values) == 1 else values
    return None


def _same(a: Decision, b: Decision) -> bool:
    ja, jb = decision_json(a), decision_json(b)
    return all(ja[k] == jb[k] for k in _SAME)


def short_form(doc: Mapping[str, Any], default_now: datetime | None = None) -> dict[str, Any]:
    """`doc` (a valid scenario, full form) written in the short form when that decides the same."""
    scenario = build_scenario("scenario", doc, default_now)
    inp = scenario.input
    pods = _short_pods(tuple(inp.pods))
    spec = doc["hpa"]["spec"]
    if pods is None or not inp.pods or len({ms.name for ms in inp.spec.metrics}) != len(inp.spec.metrics):
        return dict(doc)
    short_pods, ordered = pods
    metrics: dict[str, Any] = {}
    failures = (doc.get("metrics") or {}).get("failures")
    if failures:
        metrics["failures"] = copy.deepcopy(failures)
    for ms, reading in zip(inp.spec.metrics, inp.readings, strict=True):
        if not isinstance(reading, MetricFailure):
            metrics[ms.name] = _values(reading, ordered)
    out: dict[str, Any] = {k: copy.deepcopy(v) for k, v in doc.items() if k not in ("pods", "metrics", "scaleTarget")}
    out["hpa"] = {**out["hpa"], "spec": copy.deepcopy(spec)}
    out["now"] = doc.get("now", inp.now)
    out["scaleTarget"] = {"replicas": inp.current_replicas}
    if inp.status_replicas != inp.current_replicas:
        out["scaleTarget"] = {"spec": {"replicas": inp.current_replicas}, "status": {"replicas": inp.status_replicas}}
    out["pods"], out["metrics"] = short_pods, metrics
    try:
        shortened = build_scenario("scenario", out, default_now)
    except ValueError:
        return dict(doc)
    return out if _same(decide(inp), decide(shortened.input)) else dict(doc)
