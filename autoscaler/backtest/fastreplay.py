"""The replay's decisions without building the engine's objects, for `tune`'s many candidates.

`replay()` runs `decide()` at every step with the pods, readings and history it builds: a week
at 15 s (40,320 steps) takes seconds per spec, and a hundred candidates take minutes. Under the
replay's load model the inputs are far simpler than what `decide()` accepts:
every ready pod carries the same per-pod value, starting pods are Pending (unready) and have no
metrics, no pod is deleted, failed or without a sample. For those inputs this module keeps only how
the replay iterates -- counts of ready and starting pods, the stabilization windows as monotonic
queues, the scale events -- and decides through the engine's own numeric cores, which its
calculators and normalization call too: `plain_metric_count` (Kubernetes' `calcPlainMetricReplicas`
with the unready pods' recomputation, for Pods), `usage_ratio_count` (`getUsageRatioReplicaCount`)
and `per_pod_total_count` (`Get*PerPodMetricReplicas`) for External and Object, `legacy_limit`
(the 2x/4 scale-up limit and [min, max]), `stabilized_with_behaviors`, and `limit_with_behaviors`
(the policies over the recorded scale events). The rules around them are the engine's too:
`replicas_before_metrics` (a target at zero or outside [min, max], before any metric),
`proposal_wins` (the largest proposal across metrics) and `metrics_hold` (a failing metric blocks a
scale-down; all failing, nothing changes). They are called without a notes list, so no `Calc`
and no explanation is built. Times are whole microseconds since the first step, as datetime counts
them, so every window edge compares as it does in the engine. A stretch of steps where every metric
proposes the current count and no pod is starting changes nothing, so it is skipped in one move
(`Prepared.breaks`).

`supports(spec)` says when it applies (Pods, External and Object metrics; Resource metrics use
their readiness rules and requests, so they stay with `replay()`). tests/backtest/test_fastreplay.py
proves it gives `replay()`'s decisions, step for step, on the same history.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import deque
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import numpy as np

from autoscaler.decision import ControllerConfig, History, tolerances_for
from autoscaler.decision.engine import metrics_hold, proposal_wins, record_scale, replicas_before_metrics
from autoscaler.decision.normalize import legacy_limit, limit_with_behaviors, stabilized_with_behaviors
from autoscaler.decision.replicas import per_pod_total_count, plain_metric_count, usage_ratio_count
from autoscaler.decision.spec import HPASpec
from promscaler.quantity import to_milli

from .history import Grid, Series
from .queries import MetricQuery
from .replay import Replay, ScaleStep
from .replay import _target_value as target_value

__all__ = ["Prepared", "fast_replay", "prepare", "supports"]

_US = timedelta(microseconds=1)
_DEFAULT_CONFIG = ControllerConfig()


def supports(spec: HPASpec) -> bool:
    """The specs this path decides as the engine does: no opt-in controls (schedules, fallback and
    activation are the engine's alone) and no Resource metrics."""
    return spec.controls is None and all(ms.type in ("Pods", "External", "Object") for ms in spec.metrics)


def _us(seconds: float) -> int:
    return timedelta(seconds=seconds) // _US


class Prepared:
    """One history, made ready once for many candidates: the step times in microseconds, each
    series as Python floats, and the milli-units of each value (per ready-pod count) as asked."""

    def __init__(self, queries_data: Mapping[str, Series], grid: Grid) -> None:
        self.grid = grid
        start = grid.at(0)
        self.times = [(grid.at(i) - start) // _US for i in range(grid.count)]
        self.series = {q: s.total.tolist() for q, s in queries_data.items()}
        self.arrays = {q: s.total for q, s in queries_data.items()}
        self._milli: dict[str, list[int]] = {}
        self._per_pod: dict[tuple[str, int, int], int] = {}
        self._breaks: dict[tuple[Any, ...], np.ndarray] = {}

    def steps_without_data(self, queries: Sequence[MetricQuery]) -> int:
        """Steps where some metric has no data (the replay's `failures`)."""
        gaps = np.zeros(self.grid.count, dtype=bool)
        for q in queries:
            gaps |= np.isnan(self.arrays[q.promql])
        return int(gaps.sum())

    def breaks(self, kinds: tuple[tuple[int, int, str], ...], lo: float, hi: float, count: int) -> np.ndarray:
        """The steps where, with `count` pods all ready, some metric may propose anything but
        `count` (no data, or outside the tolerance band with ceil(ratio x pods) != count): every
        other step is quiet. The engine rounds a value up to a milli-unit, so each edge is
        narrowed by a margin of two milli-units rather than computed exactly; the steps in the
        margin are decided one by one."""
        key = (kinds, lo, hi, count)
        out = self._breaks.get(key)
        if out is None:
            maybe = np.zeros(self.grid.count, dtype=bool)
            for kind, target, promql in kinds:
                total = self.arrays[promql]
                if kind == 1:   # ceil(usage / target) against status replicas = count
                    ratio, margin, pods = total * 1000.0 / (target * count), 2.0 / (target * count), count
                elif kind == 0:   # the per-pod value, ceil(ratio x ready)
                    ratio, margin, pods = total / count * 1000.0 / target, 2.0 / target, count
                else:   # the value, ceil(ratio x ready)
                    ratio, margin, pods = total * 1000.0 / target, 2.0 / target, count
                margin += 1e-9
                scaled = ratio * pods
                with np.errstate(invalid="ignore"):
                    within = (ratio >= lo + margin) & (ratio <= hi - margin)
                    same = (scaled > pods - 1 + margin * pods) & (scaled <= pods - margin * pods)
                    maybe |= ~(within | same)
            out = self._breaks[key] = np.flatnonzero(maybe)
        return out

    def totals_milli(self, promql: str) -> list[int]:
        """Each step's value in milli-units (0 where there is no data: such a step fails first)."""
        out = self._milli.get(promql)
        if out is None:
            out = self._milli[promql] = [0 if v != v else to_milli(v) for v in self.series[promql]]
        return out

    def per_pod_milli(self, promql: str, i: int, ready: int) -> int:
        key = (promql, i, ready)
        m = self._per_pod.get(key)
        if m is None:
            m = self._per_pod[key] = to_milli(self.series[promql][i] / ready)
        return m


def prepare(data: Mapping[str, Series], grid: Grid) -> Prepared:
    return Prepared(data, grid)


class _Window:
    """The extreme recommendation strictly (or not, `inclusive`) after a cutoff: a monotonic queue."""

    def __init__(self, highest: bool, width: int, inclusive: bool = False) -> None:
        self.q: deque[tuple[int, int]] = deque()
        self.highest, self.width, self.inclusive = highest, width, inclusive

    def push(self, t: int, value: int) -> None:
        q = self.q
        if self.highest:
            while q and q[-1][1] <= value:
                q.pop()
        else:
            while q and q[-1][1] >= value:
                q.pop()
        q.append((t, value))

    def extreme(self, now: int, value: int) -> int:
        """max (or min) of `value` and the recommendations inside the window ending at `now`."""
        q, cutoff = self.q, now - self.width
        if self.inclusive:
            while q and q[0][0] < cutoff:
                q.popleft()
        else:
            while q and q[0][0] <= cutoff:
                q.popleft()
        if not q:
            return value
        best = q[0][1]
        return max(best, value) if self.highest else min(best, value)


def fast_replay(spec: HPASpec, queries: Sequence[MetricQuery], prepared: Prepared, initial_replicas: int,
                startup_delay: float = 30.0, config: ControllerConfig = _DEFAULT_CONFIG,
                metric_rows: bool = True) -> Replay:
    """`replay()`'s result for a spec `supports()` accepts; `metric_rows=False` skips the per-metric
    values and ratios (tune does not read them)."""
    if not supports(spec):
        raise ValueError("fast_replay: Resource metrics need replay()")
    grid, times = prepared.grid, prepared.times
    n = grid.count
    tol = tolerances_for(spec, config.tolerance)
    lo, hi = 1.0 - tol.scale_down, 1.0 + tol.scale_up   # the tolerance band, for the quiet stretches only
    kinds: list[tuple[int, int, str, list[int]]] = []
    for q in queries:
        t = q.metric.target
        if q.shape == "per-pod":
            kinds.append((0, t.average_value_milli or 0, q.promql, []))
        elif t.average_value_milli is not None:
            kinds.append((1, t.average_value_milli, q.promql, prepared.totals_milli(q.promql)))
        else:
            kinds.append((2, t.value_milli or 0, q.promql, prepared.totals_milli(q.promql)))
    series = [prepared.series[q.promql] for q in queries]
    per_pod_milli = prepared.per_pod_milli
    m = len(queries)
    min_r, max_r = spec.min_replicas, spec.max_replicas
    behavior = spec.behavior
    if behavior is None:
        windows = [_Window(True, _us(config.downscale_stabilization_window), inclusive=True)]
    else:
        down_w = behavior.scale_down.stabilization_window_seconds
        if down_w is None:
            down_w = int(config.downscale_stabilization_window)
        up_w = behavior.scale_up.stabilization_window_seconds or 0
        windows = [_Window(False, _us(up_w)), _Window(True, _us(down_w))]
    scales = History()  # the policies' scale events, kept as the engine keeps them (record_scale)
    delay = _us(startup_delay)
    ready_at = [-3_600_000_000] * initial_replicas   # sorted: creation order is readiness order
    current = initial_replicas
    replicas_out = np.zeros(n, dtype=np.int64)
    ready_out = np.zeros(n, dtype=np.int64)
    out = Replay(grid, replicas_out, ready_out, np.full((m, n), math.nan), np.full((m, n), math.nan))
    for w in windows:
        w.push(times[0] if n else 0, current)   # the fresh controller's recommendation
    band = tuple((kind, target, promql) for kind, target, promql, _ in kinds)
    breaks = prepared.breaks
    quiet_from: dict[int, np.ndarray] = {}
    # The count before any metric (None: the metrics decide); it changes only with `current`.
    # (replay() passes no scaled_to_zero: a target at zero stays there.)
    fixed = replicas_before_metrics(current, min_r, max_r)
    i = 0
    while i < n:
        now = times[i]
        ready = bisect_right(ready_at, now)
        unready = len(ready_at) - ready
        if not unready and fixed is None \
                and (behavior is not None or windows[0].extreme(now, current) <= current):
            # Quiet: every metric proposes `current`, so the recommendation is `current` and,
            # with nothing pending, nothing changes until the next step that may break it.
            stops = quiet_from.get(current)
            if stops is None:
                stops = quiet_from[current] = breaks(band, lo, hi, current)
            at = int(np.searchsorted(stops, i))
            j = int(stops[at]) if at < len(stops) else n
            if j > i:
                replicas_out[i:j] = current
                ready_out[i:j] = ready
                for w in windows:
                    w.push(times[j - 1], current)
                i = j
                continue
        if fixed is not None:
            desired = fixed
        else:
            best, invalid = 0, 0
            for k in range(m):
                kind, target, promql, millis = kinds[k]
                total = series[k][i]
                if total != total:   # NaN: no data at this step
                    invalid += 1
                    continue
                if kind == 0:   # every ready pod carries the same value; the Pending ones none
                    if not ready:
                        invalid += 1
                        continue
                    usage = per_pod_milli(promql, i, ready)
                    proposal = plain_metric_count(current, usage * ready, ready, target, ready, unready, 0, tol)
                elif kind == 1:
                    proposal = per_pod_total_count(len(ready_at), millis[i], target, tol)
                else:   # (no pods at all: None, the calculator's error once the ready count is needed)
                    counted = usage_ratio_count(current, millis[i], target, ready if ready_at else None, tol)
                    if counted is None:
                        invalid += 1
                        continue
                    proposal = counted
                if proposal_wins(best, proposal):
                    best = proposal
            if metrics_hold(current, best, invalid, m):
                desired = current
            else:
                rec = max(best, 0)
                if behavior is None:
                    stabilized = windows[0].extreme(now, rec)
                    windows[0].push(now, rec)
                    desired = legacy_limit(current, stabilized, min_r, max_r)[0]
                else:
                    up_rec = windows[0].extreme(now, rec)
                    down_rec = windows[1].extreme(now, rec)
                    windows[0].push(now, rec)
                    windows[1].push(now, rec)
                    desired = stabilized_with_behaviors(current, up_rec, down_rec)
                    if desired != current:   # (the limit keeps an unchanged count: no event history to read)
                        desired = limit_with_behaviors(spec, current, desired, min_r, scales.scale_up_events,
                                                       scales.scale_down_events, grid.at(i))[0]
        if desired != current:
            scales = record_scale(scales, grid.at(i), current, desired, spec)
            out.events.append(ScaleStep(i, grid.at(i), current, desired))
            if desired > current:
                ready_at.extend([now + delay] * (desired - current))
            else:
                del ready_at[len(ready_at) - (current - desired):]
            current = desired
            fixed = replicas_before_metrics(current, min_r, max_r)
        replicas_out[i] = current
        ready_out[i] = ready
        i += 1
    out.failures = prepared.steps_without_data(queries)
    if metric_rows:
        _metric_rows(out, queries, prepared, initial_replicas)
    return out


def _metric_rows(out: Replay, queries: Sequence[MetricQuery], prepared: Prepared, initial: int) -> None:
    """The per-metric values and ratios `replay()` records, from the arrays (the value the engine
    saw: per ready pod, per current replica for an AverageValue total, or the total)."""
    before = np.concatenate(([initial], out.replicas[:-1])).astype(float)
    ready = out.ready.astype(float)
    for k, q in enumerate(queries):
        total = prepared.arrays[q.promql]
        target = target_value(q.metric, {})
        with np.errstate(divide="ignore", invalid="ignore"):
            if q.shape == "per-pod":
                values = np.where(ready > 0, total / ready, math.nan)
            elif q.metric.target.average_value_milli is not None:
                values = total / np.maximum(before, 1.0)
            else:
                values = total.astype(float)
        out.values[k] = values
        out.ratios[k] = values / target
