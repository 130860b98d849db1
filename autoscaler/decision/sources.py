"""One spec metric + its reading -> a proposal, the MetricStatus Kubernetes reports, and the reasons.

The per-source dispatch of `computeReplicasForMetric` / `computeStatusFor*Metric` in horizontal.go:
which calculator each target type uses, what `currentMetrics` echoes, and which condition reason a
failure carries (FailedGetResourceMetric, FailedGetPodsMetric, ...).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from promscaler.quantity import format_milli

from . import conditions as C
from .model import (
    DecisionInput, ExternalReading, MetricDetail, MetricFailure, ObjectReading, PodReading, Proposal, Reading,
)
from .replicas import (
    MAX_INT64, Calc, CalcError, Tolerances, per_pod_total_replicas, plain_metric_replicas, render_notes,
    resource_utilization_replicas, usage_ratio_replicas,
)
from .spec import MetricSpec

__all__ = ["MetricOutcome", "compute_metric"]


class MetricOutcome(NamedTuple):
    proposal: Proposal
    status: dict[str, Any]            # MetricStatus; {"type": ""} on failure, as Kubernetes leaves it
    detail: tuple[Any, ...]           # (function, args...) -> MetricDetail, called when the details are read
    label: str                        # "pods metric http_requests", for ValidMetricFound
    failure: Any = None               # the ScalingActive condition a failure would set


_tuple_new = tuple.__new__


def _go_selector(raw: Any) -> str:
    """`%+v` of a *metav1.LabelSelector, as Kubernetes prints it in messages."""
    if raw is None:
        return "nil"
    labels = ",".join(f"{k}: {v}" for k, v in sorted((raw.get("matchLabels") or {}).items()))
    exprs = ",".join(
        f"LabelSelectorRequirement{{Key:{e.get('key')},Operator:{e.get('operator')},Values:[{' '.join(e.get('values') or [])}],}}"
        for e in raw.get("matchExpressions") or []
    )
    label_part = f"map[string]string{{{labels},}}" if labels else "map[string]string{}"
    return f"&LabelSelector{{MatchLabels:{label_part},MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}"


def _sum_capped(values: tuple[int, ...]) -> int:
    total = 0
    for v in values:
        if v > 0 and total > MAX_INT64 - v:
            return MAX_INT64
        total += v
    return total


def _target_text(ms: MetricSpec) -> str:
    text = ms.memo.get("target")
    if text is None:
        t = ms.target
        if t.type == "Utilization":
            text = f"{t.average_utilization}% of request"
        elif t.type == "AverageValue":
            text = f"{format_milli(t.average_value_milli or 0)} per pod"
        else:
            text = f"{format_milli(t.value_milli or 0)}"
        ms.memo["target"] = text
    return text


def _label(ms: MetricSpec) -> str:
    """How Kubernetes names the metric in ValidMetricFound ("pods metric qps", ...)."""
    label = ms.memo.get("label")
    if label is None:
        t = ms.type
        if t in ("Resource", "ContainerResource"):
            if ms.target.type == "Utilization":
                kind = "container resource" if t == "ContainerResource" else "resource"
                label = f"{ms.name} {kind} utilization (percentage of request)"
            else:
                label = f"{ms.name} resource"
        elif t == "Pods":
            label = f"pods metric {ms.name}"
        elif t == "Object" and ms.target.type == "Value":
            label = f"{ms.described_object.kind if ms.described_object else ''} metric {ms.name}"
        else:  # Object AverageValue reads "external metric" in Kubernetes too
            label = f"external metric {ms.name}({_go_selector(ms.selector_raw)})"
        ms.memo["label"] = label
    return label


def _fail(ms: MetricSpec, reason: str, error: str) -> MetricOutcome:
    return MetricOutcome(
        Proposal(ms.type, ms.name, None, error),
        {"type": ""},
        (MetricDetail, ms.type, ms.name, _target_text(ms), None, None, None, error),
        "",
        C.unable_to_compute(reason, error),
    )


def _ok(ms: MetricSpec, calc: Calc, status: dict[str, Any], current_text: Any) -> MetricOutcome:
    # tuple.__new__: the NamedTuple without its Python-level __new__ (one per metric per sync).
    return _tuple_new(MetricOutcome, (Proposal(ms.type, ms.name, calc.replicas), status,
                                      (_ok_detail, ms, calc, current_text), _label(ms), None))


def _ok_detail(ms: MetricSpec, calc: Calc, current_text: Any) -> MetricDetail:
    """The table row, built when someone reads it; `current_text` is a str or a deferred note."""
    if type(current_text) is not str:
        current_text = render_notes((current_text,))[0]
    return MetricDetail(ms.type, ms.name, _target_text(ms), current_text, calc.ratio, calc.replicas, None,
                        render_notes(calc.notes))


def _per_pod_text(q: str, total: int) -> str:
    return f"{q} per pod ({format_milli(total)} total)"


def compute_metric(ms: MetricSpec, reading: Reading, inp: DecisionInput, tol: Tolerances,
                   unique: bool | None = None) -> MetricOutcome:
    """One metric's outcome. `unique`: whether the pods' names are distinct, when the caller
    computed it once for all metrics (`replicas.names_unique`)."""
    mtype = ms.type
    reason = C.FAILED_GET_REASON.get(mtype, C.INVALID_METRIC_SOURCE_TYPE)
    current = inp.current_replicas
    target = ms.target
    try:
        if mtype in ("Resource", "ContainerResource"):
            return _resource(ms, reading, inp, tol, reason, unique)
        if mtype == "Pods":
            if isinstance(reading, MetricFailure):
                raise CalcError(f"unable to get metric {ms.name}: {reading.message}")
            if not isinstance(reading, PodReading):
                raise CalcError(f"unable to get metric {ms.name}: expected pod samples")
            calc = plain_metric_replicas(current, target.average_value_milli or 0, "", tol, inp.pods,
                                         reading.samples, inp.config, inp.now, unique)
            q = format_milli(calc.usage)
            status = {"type": "Pods", "pods": {"metric": ms.identifier(), "current": {"averageValue": q}}}
            return _ok(ms, calc, status, q)
        if mtype == "Object":
            if isinstance(reading, MetricFailure):
                raise CalcError(f"unable to get metric {ms.name}: {reading.message}")
            if not isinstance(reading, ObjectReading):
                raise CalcError(f"unable to get metric {ms.name}: expected an object value")
            described = ms.described_object
            ref: dict[str, Any] = {"kind": described.kind, "name": described.name} if described else {}
            if described and described.api_version:
                ref["apiVersion"] = described.api_version
            if target.type == "Value":
                calc = usage_ratio_replicas(current, reading.milli, target.value_milli or 0, tol, inp.pods)
                q = format_milli(calc.usage)
                status = {"type": "Object", "object": {"describedObject": ref, "metric": ms.identifier(),
                                                      "current": {"value": q}}}
                return _ok(ms, calc, status, q)
            calc = per_pod_total_replicas(inp.status_replicas, reading.milli, target.average_value_milli or 0, tol)
            q = format_milli(calc.usage)
            status = {"type": "Object", "object": {"describedObject": ref, "metric": ms.identifier(),
                                                  "current": {"averageValue": q}}}
            return _ok(ms, calc, status, (_per_pod_text, q, reading.milli))
        if mtype == "External":
            if isinstance(reading, MetricFailure):
                raise CalcError(f"unable to get external metric {ms.name}: {reading.message}")
            if not isinstance(reading, ExternalReading):
                raise CalcError(f"unable to get external metric {ms.name}: expected external values")
            total = _sum_capped(reading.millis)
            if target.type == "AverageValue":
                calc = per_pod_total_replicas(inp.status_replicas, total, target.average_value_milli or 0, tol)
                q = format_milli(calc.usage)
                status = {"type": "External", "external": {"metric": ms.identifier(), "current": {"averageValue": q}}}
                return _ok(ms, calc, status, (_per_pod_text, q, total))
            calc = usage_ratio_replicas(current, total, target.value_milli or 0, tol, inp.pods)
            q = format_milli(calc.usage)
            status = {"type": "External", "external": {"metric": ms.identifier(), "current": {"value": q}}}
            return _ok(ms, calc, status, q)
        return _fail(ms, C.INVALID_METRIC_SOURCE_TYPE, f'unknown metric source type "{mtype}"')
    except CalcError as exc:
        return _fail(ms, reason, str(exc))


def _resource(ms: MetricSpec, reading: Reading, inp: DecisionInput, tol: Tolerances, reason: str,
              unique: bool | None = None) -> MetricOutcome:
    res = ms.name
    target = ms.target
    utilization = target.type == "Utilization"
    what = "utilization" if utilization else "usage"
    try:
        if isinstance(reading, MetricFailure):
            raise CalcError(f"unable to get metrics for resource {res}: {reading.message}")
        if not isinstance(reading, PodReading):
            raise CalcError(f"unable to get metrics for resource {res}: expected pod samples")
        if utilization:
            calc = resource_utilization_replicas(inp.current_replicas, target.average_utilization or 0, res, tol,
                                                 inp.pods, reading.samples, inp.config, inp.now, ms.container, unique)
        else:
            calc = plain_metric_replicas(inp.current_replicas, target.average_value_milli or 0, res, tol,
                                         inp.pods, reading.samples, inp.config, inp.now, unique)
    except CalcError as exc:
        return _fail(ms, reason, f"failed to get {res} {what}: {exc}")
    q = format_milli(calc.usage)
    if utilization:
        current: dict[str, Any] = {"averageUtilization": calc.utilization, "averageValue": q}
        text: Any = ("{}% ({} avg)", calc.utilization, q)
    else:
        current = {"averageValue": q}
        text = q
    if ms.type == "ContainerResource":
        status = {"type": "ContainerResource",
                  "containerResource": {"name": res, "container": ms.container, "current": current}}
    else:
        status = {"type": "Resource", "resource": {"name": res, "current": current}}
    return _ok(ms, calc, status, text)
