"""Small builders for decision-engine tests: specs, pods and readings in a line each."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from autoscaler.decision import (
    ControllerConfig,
    DecisionInput,
    ExternalReading,
    History,
    MetricFailure,
    ObjectReading,
    PodInfo,
    PodReading,
    PodSample,
    Recommendation,
    ScaleEvent,
    parse_spec,
)

NOW = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
LONG_AGO = NOW - timedelta(hours=1)


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def spec(metrics: list[dict[str, Any]], min_r: int = 1, max_r: int = 100, behavior: dict | None = None) -> Any:
    raw: dict[str, Any] = {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "t"},
                           "minReplicas": min_r, "maxReplicas": max_r, "metrics": metrics}
    if behavior is not None:
        raw["behavior"] = behavior
    return parse_spec(raw)


def cpu_util(target: int) -> dict[str, Any]:
    return {"type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": target}}}


def cpu_value(avg: str) -> dict[str, Any]:
    return {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "AverageValue", "averageValue": avg}}}


def mem_util(target: int) -> dict[str, Any]:
    return {"type": "Resource",
            "resource": {"name": "memory", "target": {"type": "Utilization", "averageUtilization": target}}}


def container_cpu(target: int, container: str = "app") -> dict[str, Any]:
    return {"type": "ContainerResource", "containerResource": {
        "name": "cpu", "container": container, "target": {"type": "Utilization", "averageUtilization": target}}}


def pods_metric(avg: str, name: str = "qps") -> dict[str, Any]:
    return {"type": "Pods", "pods": {"metric": {"name": name}, "target": {"type": "AverageValue", "averageValue": avg}}}


def object_value(value: str, name: str = "hits") -> dict[str, Any]:
    return {"type": "Object", "object": {"describedObject": {"apiVersion": "v1", "kind": "Service", "name": "svc"},
                                          "metric": {"name": name}, "target": {"type": "Value", "value": value}}}


def object_avg(avg: str, name: str = "hits") -> dict[str, Any]:
    return {"type": "Object", "object": {"describedObject": {"apiVersion": "v1", "kind": "Service", "name": "svc"},
                                          "metric": {"name": name},
                                         "target": {"type": "AverageValue", "averageValue": avg}}}


def ext_value(value: str, name: str = "queue") -> dict[str, Any]:
    return {"type": "External", "external": {"metric": {"name": name}, "target": {"type": "Value", "value": value}}}


def ext_avg(avg: str, name: str = "queue") -> dict[str, Any]:
    return {"type": "External",
            "external": {"metric": {"name": name}, "target": {"type": "AverageValue", "averageValue": avg}}}


def pod(name: str, cpu: int | None = 1000, ready: bool | None = True, phase: str = "Running",
        start: datetime | None = LONG_AGO, transition: datetime | None = None, deleted: bool = False,
        mem: int | None = None, containers: dict[str, dict[str, int]] | None = None) -> PodInfo:
    """A pod with one container `app` requesting `cpu` milli-CPU (None: no request)."""
    if containers is None:
        reqs: dict[str, int] = {}
        if cpu is not None:
            reqs["cpu"] = cpu
        if mem is not None:
            reqs["memory"] = mem
        containers = {"app": reqs}
    cond = None if ready is None else ("True" if ready else "False")
    return PodInfo(name=name, phase=phase, deleted=deleted, ready=bool(ready),
                   ready_transition=transition if transition is not None else (start if start else None),
                   start_time=start, requests=containers, ready_condition=cond)


def pods(n: int, **kw: Any) -> list[PodInfo]:
    return [pod(f"p{i}", **kw) for i in range(n)]


def samples(values: dict[str, int] | list[int], ts: datetime = NOW - timedelta(seconds=15),
            window: float = 30.0) -> PodReading:
    if isinstance(values, list):
        values = {f"p{i}": v for i, v in enumerate(values)}
    return PodReading({k: PodSample(v, ts, window) for k, v in values.items()})


def external(*millis: int) -> ExternalReading:
    return ExternalReading(tuple(millis), NOW)


def obj(milli: int) -> ObjectReading:
    return ObjectReading(milli, NOW)


def failure(msg: str = "the server is currently unable to handle the request") -> MetricFailure:
    return MetricFailure(msg)


def recs(*pairs: tuple[float, int]) -> tuple[Recommendation, ...]:
    """Recommendations as (seconds ago, replicas)."""
    return tuple(Recommendation(ago(s), r) for s, r in pairs)


def events(*pairs: tuple[float, int]) -> tuple[ScaleEvent, ...]:
    return tuple(ScaleEvent(ago(s), c) for s, c in pairs)


def inp(spec_: Any, current: int, pods_: list[PodInfo] | tuple = (), readings: list | tuple = (),
        status_replicas: int | None = None, history: History | None = None, config: ControllerConfig | None = None,
        scaled_to_zero: bool = False, selector_error: str | None = None) -> DecisionInput:
    return DecisionInput(
        spec=spec_, current_replicas=current, status_replicas=current if status_replicas is None else status_replicas,
        pods=tuple(pods_), readings=tuple(readings), now=NOW, config=config or ControllerConfig(),
        history=history if history is not None else History(recommendations=()),
        scaled_to_zero=scaled_to_zero, selector_error=selector_error,
    )


def want(replicas: int, current: int) -> tuple[Any, ExternalReading]:
    """An External AverageValue metric (target 1 per pod) whose proposal is exactly `replicas`
    (unless replicas/current is within the tolerance), to drive normalization tests."""
    return ext_avg("1"), external(replicas * 1000)
