"""HPA status conditions with the Kubernetes controller's types, reasons and messages."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from .model import Condition

T = TypeVar("T")

__all__ = [
    "ABLE_TO_SCALE",
    "CONDITION_ORDER",
    "CONTROL_CONDITIONS",
    "FALLBACK",
    "PAUSED",
    "SCALED_TO_ZERO",
    "SCALING_ACTIVE",
    "SCALING_LIMITED",
    "make",
    "merged",
    "ordered",
    "set_by_type",
    "unable_to_compute",
]

ABLE_TO_SCALE = "AbleToScale"
SCALING_ACTIVE = "ScalingActive"
SCALING_LIMITED = "ScalingLimited"
SCALED_TO_ZERO = "ScaledToZero"
# Added with the opt-in controls (docs/controls.md); an HPA never has them.
PAUSED = "Paused"
FALLBACK = "Fallback"
CONDITION_ORDER = (ABLE_TO_SCALE, SCALING_ACTIVE, SCALING_LIMITED, SCALED_TO_ZERO, PAUSED, FALLBACK)
CONTROL_CONDITIONS = frozenset({PAUSED, FALLBACK})

# Reasons (pkg/controller/podautoscaler/horizontal.go)
SUCCEEDED_GET_SCALE = "SucceededGetScale"
SUCCEEDED_RESCALE = "SucceededRescale"
READY_FOR_NEW_SCALE = "ReadyForNewScale"
SCALE_UP_STABILIZED = "ScaleUpStabilized"
SCALE_DOWN_STABILIZED = "ScaleDownStabilized"
VALID_METRIC_FOUND = "ValidMetricFound"
SCALING_DISABLED = "ScalingDisabled"
INVALID_SELECTOR = "InvalidSelector"
AMBIGUOUS_SELECTOR = "AmbiguousSelector"
INVALID_METRIC_SOURCE_TYPE = "InvalidMetricSourceType"
FAILED_GET_REASON = {
    "Resource": "FailedGetResourceMetric",
    "ContainerResource": "FailedGetContainerResourceMetric",
    "Pods": "FailedGetPodsMetric",
    "Object": "FailedGetObjectMetric",
    "External": "FailedGetExternalMetric",
}

MSG_GOT_SCALE = "the HPA controller was able to get the target's current scale"
MSG_DISABLED = "scaling is disabled since the replica count of the target is zero"
MSG_MISSING_SELECTOR = "the HPA target's scale is missing a selector"
MSG_SCALED_TO_ZERO = "the HPA controller scaled the workload to zero"
MSG_NOT_SCALED_TO_ZERO = "the HPA controller did not scale the workload to zero"


def make(ctype: str, status: bool, reason: str, message: str) -> Condition:
    return Condition(ctype, "True" if status else "False", reason, message)


def unable_to_compute(reason: str, error: str) -> Condition:
    return make(SCALING_ACTIVE, False, reason, f"the HPA was unable to compute the replica count: {error}")


def rescaled(desired: int) -> Condition:
    return make(ABLE_TO_SCALE, True, SUCCEEDED_RESCALE,
                f"the HPA controller was able to update the target scale to {desired}")


def ordered(conditions: dict[str, Condition]) -> list[Condition]:
    return [conditions[t] for t in CONDITION_ORDER if t in conditions]


# Conditions with constant messages are immutable values: built once, shared. The set is closed
# (the reasons and messages of this module and normalize.py), so this is a table, not a cache.
_FIXED: dict[tuple[str, bool, str, str], Condition] = {}


def fixed(ctype: str, status: bool, reason: str, message: str) -> Condition:
    """`make` for the constant conditions (a fixed reason with its fixed message)."""
    key = (ctype, status, reason, message)
    cond = _FIXED.get(key)
    if cond is None:
        cond = _FIXED[key] = make(ctype, status, reason, message)
    return cond


def valid_metric_found(label: str) -> Condition:
    """ScalingActive True / ValidMetricFound naming the metric that set the recommendation."""
    return make(SCALING_ACTIVE, True, VALID_METRIC_FOUND,
                f"the HPA was able to successfully calculate a replica count from {label}")


def set_by_type(previous: Sequence[T], conditions: Iterable[Condition], type_of: Callable[[T], object],
                put: Callable[[T | None, Condition], T], drop: frozenset[str] = CONTROL_CONDITIONS) -> list[T]:
    """horizontal.go's setCondition, for each condition a sync set, on the list the autoscaler had:
    the one of the same type is replaced in place (`put(old, new)`), a new type is appended, and
    every type the sync did not set is kept as it was; but the types in `drop`, the controls' own
    (Paused, Fallback) that a deciding sync sets while the control is in force, go when it did not."""
    out = [c for c in previous if type_of(c) not in drop]
    at = {type_of(c): i for i, c in enumerate(out)}
    for cond in conditions:
        i = at.get(cond.type)
        if i is None:
            at[cond.type] = len(out)
            out.append(put(None, cond))
        else:
            out[i] = put(out[i], cond)
    return out


def merged(previous: Sequence[Condition], conditions: Iterable[Condition]) -> list[Condition]:
    """The conditions of the status a sync writes: `conditions` (the ones it set) on `previous`."""
    return set_by_type(previous, conditions, lambda c: c.type, lambda _old, new: new)
