"""The autoscaler's status (autoscaling/v2 HorizontalPodAutoscalerStatus) from a decision.

Pure: the reconciler writes what these functions build. Conditions are set by type on the ones the
object had, keeping their `lastTransitionTime` while their status is unchanged, as the Kubernetes
controller does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from autoscaler.decision.conditions import CONTROL_CONDITIONS, set_by_type
from autoscaler.decision.model import Condition
from promscaler.quantity import QuantityError, format_quantity, parse_quantity
from promscaler.times import format_time

Obj = dict[str, Any]


def merge_conditions(previous: Sequence[Obj] | None, conditions: Iterable[Condition], now: datetime,
                     generation: int | None = None, decided: bool = True) -> list[Obj]:
    """The previous conditions with this sync's set by type, as horizontal.go's setCondition does on
    the object it read: a type this sync did not set is kept as it was (a stale ScaledToZero=True,
    the ScalingLimited of the last sync that computed one), a new type is appended, and a set
    condition keeps its lastTransitionTime while its status is unchanged. `generation`: recorded as
    `observedGeneration` on each condition set (Kubernetes 1.37); None, no such field written.
    `decided`: the sync reached a decision, which sets the controls' conditions in force (the others
    go); a sync that failed before one keeps them, as it keeps status.control."""
    def put(old: Obj | None, cond: Condition) -> Obj:
        kept = old is not None and old.get("status") == cond.status and old.get("lastTransitionTime")
        obj: Obj = {"type": cond.type, "status": cond.status}
        if generation is not None:
            obj["observedGeneration"] = generation
        obj.update(lastTransitionTime=old["lastTransitionTime"] if kept and old else format_time(now),
                   reason=cond.reason, message=cond.message)
        return obj

    return set_by_type(list(previous or ()), conditions, lambda c: c.get("type"), put,
                       CONTROL_CONDITIONS if decided else frozenset())


def replace_condition(conditions: Sequence[Condition], new: Condition) -> list[Condition]:
    """`conditions` with the one of `new.type` replaced in place (or appended), all others kept."""
    return set_by_type(conditions, [new], lambda c: c.type, lambda _old, cond: cond, frozenset())


def without(conditions: Sequence[Condition], ctype: str) -> list[Condition]:
    """`conditions` less the one of `ctype` (a condition this sync turned out not to set)."""
    return [c for c in conditions if c.type != ctype]


def build_status(previous: Obj | None, *, generation: int | None, current_replicas: int, desired_replicas: int,
                 current_metrics: list[Obj] | None, conditions: Iterable[Condition], last_scale_time: datetime | None,
                 now: datetime, decided: bool = True) -> Obj:
    """`generation`: the autoscaler's metadata.generation, written as status.observedGeneration and
    on each condition (Kubernetes 1.37); None (before 1.37, or an object without one): neither."""
    previous = previous or {}
    status: Obj = {
        "currentReplicas": current_replicas,
        "desiredReplicas": desired_replicas,
        "conditions": merge_conditions(previous.get("conditions"), conditions, now, generation, decided),
    }
    if generation is not None:
        status["observedGeneration"] = generation
    if current_metrics:
        status["currentMetrics"] = current_metrics
    if last_scale_time is not None:
        status["lastScaleTime"] = format_time(last_scale_time)
    elif previous.get("lastScaleTime"):
        status["lastScaleTime"] = previous["lastScaleTime"]
    return status


# --- the summary `kubectl get` prints (the CRD's printer columns) ---------------------------------

def _q(value: Any) -> str:
    """A quantity as apimachinery's Quantity.String() prints it (canonical, binary kept binary)."""
    if value is None:
        return "<unknown>"
    try:
        return format_quantity(parse_quantity(value), binary=str(value).endswith("i"))
    except QuantityError:
        return str(value)


def _current(statuses: Sequence[Obj], i: int, source: str, field: str) -> str:
    cur = ((statuses[i].get(source) or {}).get("current") or {}) if i < len(statuses) else {}
    if field == "averageUtilization":
        return f"{cur[field]}%" if cur.get(field) is not None else "<unknown>"
    return _q(cur[field]) if cur.get(field) is not None else "<unknown>"


def format_targets(specs: Sequence[Obj] | None, statuses: Sequence[Obj] | None) -> str:
    """The TARGETS column of `kubectl get hpa` (kubectl's formatHPAMetrics): `current/target` per
    metric, `(avg)` for Object/External average values, `name: ` before resource metrics, at most
    two then `+ N more...`."""
    if not specs:
        return "<none>"
    st = list(statuses or ())
    out: list[str] = []
    for i, spec in enumerate(specs):
        kind = spec.get("type")
        source = _SOURCES.get(str(kind), "")
        block = (spec.get(source) or {}) if source else {}
        target = block.get("target") or {}
        if kind in ("External", "Object"):
            if target.get("averageValue") is not None:
                out.append(f"{_current(st, i, source, 'averageValue')}/{_q(target['averageValue'])} (avg)")
            else:
                out.append(f"{_current(st, i, source, 'value')}/{_q(target.get('value'))}")
        elif kind == "Pods":
            out.append(f"{_current(st, i, 'pods', 'averageValue')}/{_q(target.get('averageValue'))}")
        elif kind in ("Resource", "ContainerResource"):
            name = block.get("name", "")
            if target.get("averageValue") is not None:
                out.append(f"{name}: {_current(st, i, source, 'averageValue')}/{_q(target['averageValue'])}")
            else:
                util = target.get("averageUtilization")
                want = f"{util}%" if util is not None else "<auto>"
                out.append(f"{name}: {_current(st, i, source, 'averageUtilization')}/{want}")
        else:
            out.append("<unknown type>")
    if len(out) > 2:
        return f"{', '.join(out[:2])} + {len(out) - 2} more..."
    return ", ".join(out)


def describe_metrics(specs: Sequence[Obj] | None, statuses: Sequence[Obj] | None) -> list[str]:
    """The `Metrics: ( current / target )` lines of `kubectl describe hpa` (kubectl's
    describeHorizontalPodAutoscalerV2), one per spec metric, so that `kubectl describe` of a
    HorizontalAutoscaler (the generic describer, which prints fields) shows them too."""
    st = list(statuses or ())
    out: list[str] = []
    for i, spec in enumerate(specs or ()):
        kind = str(spec.get("type"))
        source = _SOURCES.get(kind, "")
        block = (spec.get(source) or {}) if source else {}
        target = block.get("target") or {}
        name = (block.get("metric") or {}).get("name", "")
        if kind in ("External", "Object"):
            what = f'"{name}"'
            if kind == "Object":
                described = block.get("describedObject") or {}
                what += f" on {described.get('kind', '')}/{described.get('name', '')}"
            average = target.get("averageValue") is not None if kind == "External" else \
                target.get("type") == "AverageValue"
            field = "averageValue" if average else "value"
            how = "target average value" if average else "target value"
            out.append(f"{what} ({how}): {_current(st, i, source, field)} / {_q(target.get(field))}")
        elif kind == "Pods":
            current = _current(st, i, source, "averageValue")
            out.append(f'"{name}" on pods: {current} / {_q(target.get("averageValue"))}')
        elif kind in ("Resource", "ContainerResource"):
            what = f"resource {block.get('name', '')}"
            if kind == "ContainerResource":
                what += f' of container "{block.get("container", "")}"'
            if target.get("averageValue") is not None:
                out.append(f"{what} on pods: {_current(st, i, source, 'averageValue')} / {_q(target['averageValue'])}")
                continue
            util = _current(st, i, source, "averageUtilization")
            if util != "<unknown>":
                util += f" ({_current(st, i, source, 'averageValue')})"
            want = f"{target['averageUtilization']}%" if target.get("averageUtilization") is not None else "<auto>"
            out.append(f"{what} on pods (as a percentage of request): {util} / {want}")
        else:
            out.append(f'<unknown metric type "{kind}">')
    return out


_SOURCES = {"External": "external", "Pods": "pods", "Object": "object", "Resource": "resource",
            "ContainerResource": "containerResource"}


def with_summary(status: Obj, spec: Obj | None) -> Obj:
    """`status` plus what kubectl prints for an HPA and cannot print for a custom resource by
    itself: the CRD's printer columns' REFERENCE and TARGETS, and for `kubectl describe` the
    metrics' current / target lines; currentMetrics stay as they are."""
    spec = spec or {}
    ref = spec.get("scaleTargetRef") or {}
    return {**status, "reference": f"{ref.get('kind', '')}/{ref.get('name', '')}",
            "targets": format_targets(spec.get("metrics"), status.get("currentMetrics")),
            "metrics": describe_metrics(spec.get("metrics"), status.get("currentMetrics"))}
