"""The replay: the decision engine stepped over history at the sync period, with its
stabilization and policy history, simulated pods and a load model.

Load model (stated in every report): for a `per-pod` metric (Pods, Resource) the observed total
(per-pod value x observed pods, i.e. the sum of the pods' series) is spread evenly over the
simulated *ready* pods; External and Object values are taken as observed. Simulated pods start
`startup_delay` seconds after the scale-up that created them (Pending until then, without
metrics, as a starting pod is to the HPA); scale-downs remove pending pods first, then the
newest. Nothing else of the cluster is modelled (see docs/autoscaler.md, "The load model").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from autoscaler.decision import (
    ControllerConfig,
    Decision,
    DecisionInput,
    ExternalReading,
    History,
    MetricFailure,
    ObjectReading,
    PodInfo,
    PodReading,
    PodSample,
    Reading,
    decide,
    record_scale,
    tolerances_for,
)
from autoscaler.decision.controls import Composite, compose
from autoscaler.decision.spec import HPASpec, MetricSpec
from promscaler.quantity import to_milli

from .history import Grid, Series
from .queries import MetricQuery

__all__ = ["LOAD_MODEL", "Replay", "ScaleStep", "replay", "tolerance_up"]

LOAD_MODEL = ("per-pod metrics (Pods, Resource): the observed total (sum of the pods' series) spread evenly over "
              "the simulated ready pods; External and Object: taken as observed; new pods ready after the "
              "start-up delay, without metrics until then")
_DEFAULT_CONFIG = ControllerConfig()


@dataclass(frozen=True)
class ScaleStep:
    index: int
    time: datetime
    before: int
    after: int
    # the decision that scaled: `replay()` keeps it, so the report can show why; `fast_replay` has none
    decision: Decision | None = field(default=None, compare=False, repr=False)

    @property
    def explanation(self) -> tuple[str, ...]:
        """The engine's words for this decision (what `simulate` prints), formatted on first read:
        tune never reads them."""
        return () if self.decision is None else tuple(self.decision.explanation)


@dataclass
class Replay:
    grid: Grid
    replicas: np.ndarray          # spec.replicas after each step's decision
    ready: np.ndarray             # simulated ready pods at each step (before the decision)
    ratios: np.ndarray            # per metric x step: the value the engine saw / its target (NaN: none);
                                  # a composite metric's inputs: the composite metric's (scalingModifiers)
    values: np.ndarray            # per metric x step: per-pod (or total, for Value targets) value the engine saw
    events: list[ScaleStep] = field(default_factory=list)
    failures: int = 0             # steps where some metric had no data
    controls: bool = False        # the spec has fallback, schedules or activation (docs/controls.md)
    fallback: int = 0             # steps decided by spec.fallback
    scheduled: int = 0            # steps with a schedule window open


def _target_value(ms: MetricSpec, requests: Mapping[str, int]) -> float:
    """The per-pod (or total, for Value) target in the metric's units; for Utilization, that share
    of the simulated pods' request (NaN without --pod-requests)."""
    t = ms.target
    milli = t.average_value_milli if t.average_value_milli is not None else t.value_milli
    if milli is not None:
        return milli / 1000.0
    request = requests.get(ms.name)
    if t.average_utilization is None or request is None:
        return math.nan
    return request / 1000.0 * t.average_utilization / 100.0


class _Pods:
    """The simulated pods: (name, created, ready_at); PodInfo objects made once per pod state."""

    def __init__(self, replicas: int, start: datetime, requests: Mapping[str, int]) -> None:
        self.requests = {"app": dict(requests)} if requests else {}
        self.serial = 0
        self.pods: list[tuple[str, datetime, datetime]] = []
        self.infos: dict[tuple[str, bool], PodInfo] = {}
        self.add(replicas, start - timedelta(hours=1), timedelta(0))

    def add(self, n: int, now: datetime, delay: timedelta) -> None:
        for _ in range(n):
            self.serial += 1
            self.pods.append((f"pod-{self.serial}", now, now + delay))

    def remove(self, n: int, now: datetime) -> None:
        """The ReplicaSet controller's order: not-ready pods first, then the newest."""
        pending = [p for p in self.pods if p[2] > now]
        ready = [p for p in self.pods if p[2] <= now]
        gone = {p[0] for p in (pending[::-1] + ready[::-1])[:n]}
        self.pods = [p for p in self.pods if p[0] not in gone]
        for name in gone:
            self.infos.pop((name, True), None)
            self.infos.pop((name, False), None)

    def state(self, now: datetime) -> tuple[tuple[PodInfo, ...], list[str]]:
        infos, ready = [], []
        for name, created, ready_at in self.pods:
            is_ready = ready_at <= now
            info = self.infos.get((name, is_ready))
            if info is None:
                info = PodInfo(name, phase="Running" if is_ready else "Pending", ready=is_ready,
                               ready_transition=ready_at if is_ready else created, start_time=created,
                               requests=self.requests)
                self.infos[(name, is_ready)] = info
            infos.append(info)
            if is_ready:
                ready.append(name)
        return tuple(infos), ready


def _composite_ratio(composite: Composite, readings: Sequence[Reading], now: datetime, current: int) -> float:
    """The composite metric's value (KEDA's scalingModifiers, as decide() computes it) over its
    target, per replica for an AverageValue target: what its inputs' ratios are in the report."""
    reading = compose(composite, readings, now)[-1]
    if not isinstance(reading, ExternalReading):
        return math.nan
    metric = composite.metrics[-1]
    value = sum(reading.millis) / 1000.0
    if metric.target.average_value_milli is not None:
        value /= max(current, 1)
    return value / _target_value(metric, {})


def replay(spec: HPASpec, queries: Sequence[MetricQuery], data: Mapping[str, Series], grid: Grid,
           initial_replicas: int, startup_delay: float = 30.0, config: ControllerConfig = _DEFAULT_CONFIG,
           requests: Mapping[str, int] | None = None) -> Replay:
    n, m = grid.count, len(queries)
    replicas_out = np.zeros(n, dtype=np.int64)
    ready_out = np.zeros(n, dtype=np.int64)
    ratios = np.full((m, n), math.nan)
    values = np.full((m, n), math.nan)
    targets = [_target_value(q.metric, requests or {}) for q in queries]
    series = [data[q.promql].total.tolist() for q in queries]  # Python floats: the engine's arithmetic
    delay = timedelta(seconds=startup_delay)
    pods = _Pods(initial_replicas, grid.at(0), requests or {})
    current = initial_replicas
    history = History()
    out = Replay(grid, replicas_out, ready_out, ratios, values, controls=spec.controls is not None)
    composite = spec.controls.composite if spec.controls is not None else None
    inputs = [k for _, k in composite.inputs] if composite is not None else []
    for i in range(n):
        now = grid.at(i)
        infos, ready = pods.state(now)
        readings: list[Reading] = []
        missing = False
        for k, q in enumerate(queries):
            total = series[k][i]
            if total != total:  # NaN: no data at this step
                readings.append(MetricFailure("no data in Prometheus at this step"))
                missing = True
                continue
            if q.shape == "per-pod":
                if not ready:
                    readings.append(MetricFailure("no ready pods to carry the load"))
                    continue
                per_pod = total / len(ready)
                sample = PodSample(to_milli(per_pod), now, 0.0)
                readings.append(PodReading(dict.fromkeys(ready, sample)))
                values[k, i] = per_pod
                ratios[k, i] = per_pod / targets[k]
            else:
                t = q.metric.target
                if q.metric.type == "External":
                    readings.append(ExternalReading((to_milli(total),), now))
                else:
                    readings.append(ObjectReading(to_milli(total), now))
                if t.average_value_milli is not None:
                    values[k, i] = total / max(current, 1)
                else:
                    values[k, i] = total
                ratios[k, i] = values[k, i] / targets[k]
        out.failures += missing
        if composite is not None:
            ratios[inputs, i] = _composite_ratio(composite, readings, now, current)
        decision = decide(DecisionInput(spec=spec, current_replicas=current, status_replicas=len(pods.pods),
                                        pods=infos, readings=readings, now=now, config=config, history=history))
        history = decision.history
        if decision.controls is not None:
            out.fallback += decision.controls.fallback
            out.scheduled += decision.controls.window is not None
        desired = decision.desired_replicas
        if desired != current:
            history = record_scale(history, now, current, desired, spec)
            out.events.append(ScaleStep(i, now, current, desired, decision))
            if desired > current:
                pods.add(desired - current, now, delay)
            else:
                pods.remove(current - desired, now)
            current = desired
        replicas_out[i] = current
        ready_out[i] = len(ready)
    return out


def tolerance_up(spec: HPASpec, config: ControllerConfig) -> float:
    return tolerances_for(spec, config.tolerance).scale_up
