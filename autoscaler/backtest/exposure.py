"""What pods went through, measured on the observed load rather than on what the engine saw.

A spec's own figures judge each metric against its own target, so a spec that adds a forecast
metric, or raises its target, changes them without changing what the pods carried. These figures
hold ONE reference fixed for every spec of a run (`Reference`: the observed metric the load is read
from, a per-pod capacity and a tolerance; by default the baseline's: the first spec of `backtest`,
the given spec of `tune`) and look at the observed load of that metric (`observed`; a KEDA
ScaledObject with scalingModifiers: its composite metric, the formula over the observed totals of
its triggers), so the same spec reads the same seconds in `backtest` and `tune`:

- load per ready pod: the observed total / the simulated ready pods for a per-pod metric (Pods,
  Resource) and for an AverageValue External/Object metric; the observed value for a Value one;
- exposure (seconds under-provisioned): the steps where that load is above
  target x (1 + tolerance), times the step (no ready pod with load present counts as above);
- time to capacity, per rise: from the first step above that band to the first step back within
  it, which is when enough pods are ready to carry the load (rate window, sync period and pod
  start-up all included, since the replay's ready pods lag all three). A rise still open at the
  end of the range is counted apart (`open`), not in the median or maximum.
Pure functions over arrays; the replay supplies the ready pods.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from autoscaler.decision.formula import FormulaError
from autoscaler.decision.spec import HPASpec
from promscaler.quantity import to_milli

from .history import Series
from .queries import MetricQuery

__all__ = ["Exposure", "Reference", "exposure", "load_per_pod", "observed", "observed_query"]


@dataclass(frozen=True)
class Reference:
    query: MetricQuery   # the observed metric the load is read from (the baseline's first non-forecast one)
    target: float        # per pod (or the value, for a Value target), in the metric's units
    tolerance: float     # the band's upper edge is target x (1 + tolerance)
    source: str = ""     # where target and tolerance come from, as the reports name it

    @property
    def metric(self) -> str:
        """"Pods http_requests": how the reports name the metric."""
        return f"{self.query.metric.type} {self.query.metric.name}"

    @property
    def band(self) -> float:
        return self.target * (1.0 + self.tolerance)

    def load(self, observed: np.ndarray, ready: np.ndarray) -> np.ndarray:
        """The observed load per ready pod of one replay (its ready pods)."""
        return load_per_pod(self.query, observed, ready)

    def flags(self) -> list[str]:
        """The flags that set this reference in `backtest` and `tune` whatever spec comes first."""
        return ["--reference-target", f"{self.target:g}", "--reference-tolerance", f"{self.tolerance:g}"]

    def text(self) -> str:
        """One line for the printed reports."""
        return (f"under-provisioned: the observed {self.metric} per ready pod above {self.target:g} x "
                f"(1 + {self.tolerance:g}) = {self.band:g}" + (f" ({self.source})" if self.source else ""))

    def row(self) -> dict[str, Any]:
        return {"metric": self.metric, "target": self.target, "tolerance": self.tolerance, "from": self.source}


def observed_query(spec: HPASpec, queries: Sequence[MetricQuery]) -> MetricQuery:
    """The metric the load is read from: the spec's first metric that is not a forecast; with KEDA's
    scalingModifiers, the composite metric."""
    composite = spec.controls.composite if spec.controls is not None else None
    if composite is None:
        return next((q for q in queries if q.forecast is None), queries[0])
    return MetricQuery(composite.metrics[-1], f"scalingModifiers.formula: {composite.formula.text}", "total",
                       "scalingModifiers")


def observed(spec: HPASpec, queries: Sequence[MetricQuery], data: Mapping[str, Series]) -> np.ndarray:
    """The observed total per step of `observed_query`'s metric; with KEDA's scalingModifiers, the
    formula over its triggers' totals as decide() computes it (milli-units truncated; NaN where a
    trigger has no data or the formula gives no number)."""
    composite = spec.controls.composite if spec.controls is not None else None
    if composite is None:
        return data[observed_query(spec, queries).promql].total
    inputs = [(name, data[queries[k].promql].total.tolist()) for name, k in composite.inputs]
    count = len(data[queries[0].promql].total)
    total = np.full(count, math.nan)
    for i in range(count):
        if any(series[i] != series[i] for _, series in inputs):  # NaN: no data at this step
            continue
        values = {name: to_milli(series[i]) / 1000 for name, series in inputs}  # as the replay reads them
        try:
            total[i] = math.trunc(composite.formula.value(values) * 1000) / 1000
        except FormulaError:
            continue
    return total


def load_per_pod(query: MetricQuery, total: np.ndarray, ready: np.ndarray) -> np.ndarray:
    """The observed load each ready pod carried (NaN without data; +inf with load and no ready pod)."""
    per_pod = query.shape == "per-pod" or query.metric.target.average_value_milli is not None
    if not per_pod:
        return total.astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = total / ready
    out[(ready == 0) & (total == 0)] = 0.0
    return out


@dataclass(frozen=True)
class Exposure:
    reference: Reference
    step: float
    above: np.ndarray          # bool per step: load per ready pod above the band
    rises: tuple[float, ...]   # seconds from each rise above the band to back within
    open: int                  # rises still above the band at the end

    @property
    def seconds(self) -> float:
        return float(self.above.sum()) * self.step

    def summary(self) -> dict[str, Any]:
        done = sorted(self.rises)
        return {
            "referenceMetric": self.reference.metric,
            "referenceTarget": self.reference.target,
            "tolerance": self.reference.tolerance,
            "referenceFrom": self.reference.source,
            "secondsUnderProvisioned": self.seconds,
            "timeToCapacitySeconds": {
                "rises": len(done) + self.open,
                "median": float(np.median(done)) if done else None,
                "max": max(done) if done else None,
                "open": self.open,
            },
        }


def exposure(load: np.ndarray, reference: Reference, step: float) -> Exposure:
    with np.errstate(invalid="ignore"):
        above = load > reference.band   # NaN (no data) is not above
    edges = np.diff(np.concatenate(([0], above.astype(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    n = len(load)
    rises = tuple(float(e - s) * step for s, e in zip(starts, ends, strict=True) if e < n)
    open_ = int(bool(len(ends)) and ends[-1] == n)
    return Exposure(reference, step, above, rises, open_)
