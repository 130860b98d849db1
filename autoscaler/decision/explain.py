"""Plain-words reasoning for one decision: the lines `simulate` prints and `-o json` carries."""

from __future__ import annotations

from collections.abc import Sequence

from .model import Condition, MetricDetail

__all__ = ["explain"]


def explain(
    pre: Sequence[str],
    details: Sequence[MetricDetail],
    recommendation: int | None,
    steps: Sequence[str],
    current: int,
    desired: int,
    conditions: Sequence[Condition],
) -> list[str]:
    lines = list(pre)
    for d in details:
        head = f"{d.type} {d.name}"
        if d.error is not None:
            lines.append(f"{head}: could not be computed: {d.error}")
            continue
        ratio = "" if d.ratio is None else f", ratio {d.ratio:.3f}"
        lines.append(f"{head}: current {d.current}, target {d.target}{ratio} -> {d.replicas} replicas")
        lines.extend(f"  {note}" for note in d.notes)
    if recommendation is not None and details:
        lines.append(f"recommendation (largest proposal): {recommendation}")
    lines.extend(steps)
    if desired == current:
        lines.append(f"result: stay at {current} replicas")
    else:
        lines.append(f"result: scale from {current} to {desired} replicas")
    return lines
