"""One spec metric + its reading -> a proposal, the MetricStatus Kubernetes reports, and the reasons.

The per-source dispatch of `computeReplicasForMetric` / `computeStatusFor*Metric` in horizontal.go:
which calculator each target type uses, what `currentMetrics` echoes, and which condition reason a
failure carries (FailedGetResourceMetric, FailedGetPodsMetric, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from promscaler.quantity import format_milli
from promscaler.selectors import go_label_selector

from . import conditions as C
from .model import (
    Condition,
    DecisionInput,
    ExternalReading,
    MetricDetail,
    MetricFailure,
    ObjectReading,
    PodReading,
    Proposal,
    Reading,
)
from .replicas import (
    MAX_INT64,
    Calc,
    CalcError,
    Tolerances,
    per_pod_total_replicas,
    plain_metric_replicas,
    render_notes,
    resource_utilization_replicas,
    usage_ratio_replicas,
)
from .spec import MetricSpec

__all__ = ["MetricOutcome", "compute_metric"]


class MetricOutcome(NamedTuple):
    proposal: Proposal
    status: dict[str, Any]            # MetricStatus; {"type": ""} on failure, as Kubernetes leaves it
    detail: tuple[Any, ...]           # (function, args...) -> MetricDetail, called when the details are read
    label: str                        # Kubernetes' metricNameProposal ("pods metric http_requests", ...)
    failure: Condition | None = None  # the ScalingActive condition a failure sets


def _sum_capped(values: tuple[int, ...]) -> int:
    total = 0
    for v in values:
        if v > 0 and total > MAX_INT64 - v:
            return MAX_INT64
        total += v
    return total


def _wrapped(ms: MetricSpec, error: str) -> str:
    """The error as horizontal.go's computeReplicasForMetric returns it: its computeStatusFor*Metric's
    wrapping (AverageValue Object and External metrics, External Value ones), then its own."""
    name, average = ms.name, ms.target.type == "AverageValue"
    if ms.type == "Object":
        return f"failed to get object metric value: {f'failed to get {name} object metric: ' if average else ''}{error}"
    if ms.type == "Pods":
        return f"failed to get pods metric value: {error}"
    if ms.type == "Resource":
        return f"failed to get {name} resource metric value: {error}"
    if ms.type == "ContainerResource":
        return f"failed to get {ms.container} container metric value: {error}"
    if ms.type == "External":
        inner = f"failed to get {name} external metric: " if average else f"failed to get external metric {name}: "
        return f"failed to get {name} external metric value: {inner}{error}"
    return error


def _fail(ms: MetricSpec, reason: str, error: str) -> MetricOutcome:
    return MetricOutcome(
        Proposal(ms.type, ms.name, None, error, _wrapped(ms, error)),
        {"type": ""},
        (MetricDetail, ms.type, ms.name, ms.target_text, None, None, None, error),
        "",
        C.unable_to_compute(reason, error),
    )


def _ok(ms: MetricSpec, calc: Calc, status: dict[str, Any], current_text: Any) -> MetricOutcome:
    return MetricOutcome(Proposal(ms.type, ms.name, calc.replicas), status, (_ok_detail, ms, calc, current_text),
                         ms.label)


def _ok_detail(ms: MetricSpec, calc: Calc, current_text: Any) -> MetricDetail:
    """The table row, built when someone reads it; `current_text` is a str or a deferred note."""
    return MetricDetail(ms.type, ms.name, ms.target_text, render_notes((current_text,))[0], calc.ratio, calc.replicas,
                        None, render_notes(calc.notes))


def _per_pod_text(q: str, total: int) -> str:
    return f"{q} per pod ({format_milli(total)} total)"


def _pod_samples(reading: Reading | None, what: str) -> PodReading:
    if isinstance(reading, MetricFailure):
        raise CalcError(f"{what}: {reading.message}")
    if not isinstance(reading, PodReading):
        raise CalcError(f"{what}: expected pod samples")
    return reading


def _resource(ms: MetricSpec, reading: Reading | None, inp: DecisionInput, tol: Tolerances) -> MetricOutcome:
    """`computeStatusForResourceMetricGeneric`: Resource and ContainerResource."""
    res, target = ms.name, ms.target
    utilization = target.type == "Utilization"
    try:
        samples = _pod_samples(reading, f"unable to get metrics for resource {res}").samples
        if utilization:
            calc = resource_utilization_replicas(inp.current_replicas, target.average_utilization or 0, res, tol,
                                                 inp.pods, samples, inp.config, inp.now, ms.container)
        else:
            calc = plain_metric_replicas(inp.current_replicas, target.average_value_milli or 0, res, tol,
                                         inp.pods, samples, inp.config, inp.now)
    except CalcError as exc:
        what = "utilization" if utilization else "usage"
        return _fail(ms, C.FAILED_GET_REASON[ms.type], f"failed to get {res} {what}: {exc}")
    q = format_milli(calc.usage)
    current: dict[str, Any] = {"averageValue": q}
    text: Any = q
    if utilization:
        current = {"averageUtilization": calc.utilization, "averageValue": q}
        text = ("{}% ({} avg)", calc.utilization, q)
    if ms.type == "ContainerResource":
        status = {"type": "ContainerResource",
                  "containerResource": {"name": res, "container": ms.container, "current": current}}
    else:
        status = {"type": "Resource", "resource": {"name": res, "current": current}}
    return _ok(ms, calc, status, text)


def _pods(ms: MetricSpec, reading: Reading | None, inp: DecisionInput, tol: Tolerances) -> MetricOutcome:
    """`computeStatusForPodsMetric`: an AverageValue over the pods."""
    samples = _pod_samples(reading, f"unable to get metric {ms.name}").samples
    calc = plain_metric_replicas(inp.current_replicas, ms.target.average_value_milli or 0, "", tol, inp.pods,
                                 samples, inp.config, inp.now)
    q = format_milli(calc.usage)
    status = {"type": "Pods", "pods": {"metric": ms.identifier(), "current": {"averageValue": q}}}
    return _ok(ms, calc, status, q)


def _object(ms: MetricSpec, reading: Reading | None, inp: DecisionInput, tol: Tolerances) -> MetricOutcome:
    """`computeStatusForObjectMetric`: Value (ratio x ready pods) or AverageValue (per pod)."""
    if isinstance(reading, MetricFailure):
        raise CalcError(_object_error(ms, inp, reading.message))
    if not isinstance(reading, ObjectReading):
        raise CalcError(_object_error(ms, inp, "expected an object value"))
    described = ms.described_object
    ref: dict[str, Any] = {"kind": described.kind, "name": described.name} if described else {}
    if described and described.api_version:
        ref["apiVersion"] = described.api_version
    target = ms.target
    if target.type == "Value":
        calc = usage_ratio_replicas(inp.current_replicas, reading.milli, target.value_milli or 0, tol, inp.pods)
        current: dict[str, str] = {"value": format_milli(calc.usage)}
        text: Any = current["value"]
    else:
        calc = per_pod_total_replicas(inp.status_replicas, reading.milli, target.average_value_milli or 0, tol)
        current = {"averageValue": format_milli(calc.usage)}
        text = (_per_pod_text, current["averageValue"], reading.milli)
    status = {"type": "Object", "object": {"describedObject": ref, "metric": ms.identifier(), "current": current}}
    return _ok(ms, calc, status, text)


def _object_error(ms: MetricSpec, inp: DecisionInput, error: str) -> str:
    """GetObject(PerPod)MetricReplicas' error. Until 1.37 (#139029) its format's arguments were out of
    order, so the object's kind stood where the error belongs and the error after the slash."""
    ref = ms.described_object
    kind, name, ns = (ref.kind, ref.name, inp.namespace) if ref else ("", "", inp.namespace)
    if inp.config.features.object_error_in_order:
        return f"unable to get metric {ms.name} on {kind} {ns}/{name}: {error}"
    return f"unable to get metric {ms.name}: {kind} on {ns} {name}/{error}"


def _external_error(ms: MetricSpec, inp: DecisionInput, error: str) -> str:
    """GetExternal(PerPod)MetricReplicas' error: namespace, metric and its selector as Go prints it."""
    return f"unable to get external metric {inp.namespace}/{ms.name}/{go_label_selector(ms.selector_raw)}: {error}"


def _external(ms: MetricSpec, reading: Reading | None, inp: DecisionInput, tol: Tolerances) -> MetricOutcome:
    """`computeStatusForExternalMetric`: the sum of the matching series, per pod or as a value."""
    if isinstance(reading, MetricFailure):
        raise CalcError(_external_error(ms, inp, reading.message))
    if not isinstance(reading, ExternalReading):
        raise CalcError(_external_error(ms, inp, "expected external values"))
    total = _sum_capped(reading.millis)
    target = ms.target
    if target.type == "AverageValue":
        calc = per_pod_total_replicas(inp.status_replicas, total, target.average_value_milli or 0, tol)
        q = format_milli(calc.usage)
        status = {"type": "External", "external": {"metric": ms.identifier(), "current": {"averageValue": q}}}
        return _ok(ms, calc, status, (_per_pod_text, q, total))
    calc = usage_ratio_replicas(inp.current_replicas, total, target.value_milli or 0, tol, inp.pods)
    q = format_milli(calc.usage)
    status = {"type": "External", "external": {"metric": ms.identifier(), "current": {"value": q}}}
    return _ok(ms, calc, status, q)


_BY_TYPE: dict[str, Callable[[MetricSpec, Reading | None, DecisionInput, Tolerances], MetricOutcome]] = {
    "Resource": _resource, "ContainerResource": _resource, "Pods": _pods, "Object": _object, "External": _external,
}


def compute_metric(ms: MetricSpec, reading: Reading | None, inp: DecisionInput, tol: Tolerances) -> MetricOutcome:
    """`computeReplicasForMetric`: one metric's outcome (a missing reading fails that metric)."""
    compute = _BY_TYPE.get(ms.type)
    if compute is None:
        return _fail(ms, C.INVALID_METRIC_SOURCE_TYPE, f'unknown metric source type "{ms.type}"')
    try:
        return compute(ms, reading, inp, tol)
    except CalcError as exc:
        return _fail(ms, C.FAILED_GET_REASON[ms.type], str(exc))
