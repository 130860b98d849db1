"""The autoscaler's status (autoscaling/v2 HorizontalPodAutoscalerStatus) from a decision.

Pure: the reconciler writes what these functions build. Conditions keep their
`lastTransitionTime` while their status is unchanged, as the Kubernetes controller does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from autoscaler.decision.model import Condition
from promscaler.times import format_time

Obj = dict[str, Any]


def merge_conditions(previous: Sequence[Obj] | None, conditions: Iterable[Condition], now: datetime) -> list[Obj]:
    """New conditions as API objects; a condition whose status did not change keeps its
    lastTransitionTime."""
    before = {c.get("type"): c for c in previous or ()}
    out: list[Obj] = []
    for cond in conditions:
        old = before.get(cond.type)
        since = old.get("lastTransitionTime") if old and old.get("status") == cond.status and old.get("lastTransitionTime") else format_time(now)
        out.append({"type": cond.type, "status": cond.status, "lastTransitionTime": since, "reason": cond.reason, "message": cond.message})
    return out


def replace_condition(conditions: Sequence[Condition], new: Condition) -> list[Condition]:
    """`conditions` with the one of `new.type` replaced (or appended)."""
    out = [c for c in conditions if c.type != new.type]
    out.insert(next((i for i, c in enumerate(conditions) if c.type == new.type), len(out)), new)
    return out


def build_status(previous: Obj | None, *, generation: int | None, current_replicas: int, desired_replicas: int,
                 current_metrics: list[Obj] | None, conditions: Iterable[Condition], last_scale_time: datetime | None,
                 now: datetime) -> Obj:
    previous = previous or {}
    status: Obj = {
        "currentReplicas": current_replicas,
        "desiredReplicas": desired_replicas,
        "conditions": merge_conditions(previous.get("conditions"), conditions, now),
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
