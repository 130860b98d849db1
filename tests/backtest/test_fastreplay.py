"""`fast_replay()` (tune's path) decides exactly as `replay()` (the engine, `decide()` at each step)
on the same history: every step's replicas and ready pods, every scale event, the steps without
data and the values the engine saw, for specs that exercise each branch: Pods, External and
Object metrics (Value and AverageValue), several metrics at once, gaps in the data, the legacy
normalization and behaviors with windows, Pods/Percent policies, selectPolicy Min/Max/Disabled,
per-direction tolerances, and start-up delays that leave pods Pending across many steps."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import pytest

from autoscaler.backtest.fastreplay import fast_replay, prepare, supports
from autoscaler.backtest.history import Grid, Series
from autoscaler.backtest.queries import MetricQuery
from autoscaler.backtest.replay import replay
from autoscaler.decision import ControllerConfig, parse_spec

STEPS = 1500
REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}


def _pods(target: str) -> dict:
    return {"type": "Pods", "pods": {"metric": {"name": "load"},
                                     "target": {"type": "AverageValue", "averageValue": target}}}


def _external(kind: str, target: str) -> dict:
    key = "averageValue" if kind == "AverageValue" else "value"
    return {"type": "External", "external": {"metric": {"name": "queue"}, "target": {"type": kind, key: target}}}


def _object(kind: str, target: str) -> dict:
    key = "averageValue" if kind == "AverageValue" else "value"
    return {"type": "Object", "object": {"describedObject": {"apiVersion": "v1", "kind": "Service", "name": "front"},
                                         "metric": {"name": "rps"}, "target": {"type": kind, key: target}}}


def _rules(window: int | None, select: str, policies: list, tolerance: float | None = None) -> dict:
    out: dict = {"selectPolicy": select, "policies": policies}
    if window is not None:
        out["stabilizationWindowSeconds"] = window
    if tolerance is not None:
        out["tolerance"] = tolerance
    return out


SPECS = {
    "legacy, Pods": ([_pods("10")], None, 1, 30),
    "legacy, Pods, min 3": ([_pods("7500m")], None, 3, 12),
    "default behavior": ([_pods("10")], {}, 1, 30),
    "fast down, Pods policies": ([_pods("10")], {
        "scaleUp": _rules(0, "Max", [{"type": "Pods", "value": 2, "periodSeconds": 60}]),
        "scaleDown": _rules(45, "Max", [{"type": "Pods", "value": 1, "periodSeconds": 30}])}, 2, 25),
    "up window, Min policies, tolerances": ([_pods("10")], {
        "scaleUp": _rules(60, "Min", [{"type": "Pods", "value": 3, "periodSeconds": 30},
                                      {"type": "Percent", "value": 50, "periodSeconds": 90}], 0.05),
        "scaleDown": _rules(120, "Min", [{"type": "Percent", "value": 20, "periodSeconds": 60},
                                         {"type": "Pods", "value": 2, "periodSeconds": 45}], 0.25)}, 1, 40),
    "down disabled": ([_pods("10")], {"scaleDown": _rules(0, "Disabled", [{"type": "Pods", "value": 1,
                                                                            "periodSeconds": 15}])}, 1, 30),
    "up disabled": ([_pods("10")], {"scaleUp": _rules(0, "Disabled", [{"type": "Pods", "value": 1,
                                                                        "periodSeconds": 15}])}, 4, 30),
    "external average": ([_external("AverageValue", "30")], {}, 1, 30),
    "external value": ([_external("Value", "300")], None, 1, 30),
    "object value and average": ([_object("Value", "200"), _object("AverageValue", "15")], {}, 1, 50),
    # each direction keeps its events for its own longest period, and each limit reads both directions
    "up and down periods far apart": ([_pods("10")], {
        "scaleUp": _rules(0, "Max", [{"type": "Percent", "value": 20, "periodSeconds": 900}]),
        "scaleDown": _rules(30, "Max", [{"type": "Pods", "value": 1, "periodSeconds": 15}])}, 2, 30),
    "down period longer than up": ([_pods("10")], {
        "scaleUp": _rules(0, "Max", [{"type": "Pods", "value": 2, "periodSeconds": 30}]),
        "scaleDown": _rules(0, "Max", [{"type": "Percent", "value": 10, "periodSeconds": 1800}])}, 2, 30),
    "pods + external, down window": ([_pods("10"), _external("AverageValue", "40")], {
        "scaleDown": _rules(300, "Max", [{"type": "Percent", "value": 10, "periodSeconds": 60}])}, 2, 60),
}


def _history(seed: int) -> tuple[dict[str, Series], Grid]:
    """A noisy wave with steep steps, and gaps without data."""
    rng = np.random.default_rng(seed)
    t = np.arange(STEPS)
    load = 60 + 50 * np.sin(2 * math.pi * t / 400) + rng.normal(0, 8, STEPS)
    load += np.where((t % 300) < 20, 150, 0)
    load = np.maximum(load, 0)
    queue = load * 7 + rng.normal(0, 20, STEPS)
    rps = load * 1.3
    for arr in (load, queue, rps):
        arr[rng.choice(STEPS, 15, replace=False)] = math.nan
    data = {name: Series(arr, np.where(np.isnan(arr), 0, 1)) for name, arr in
            (("load", load), ("queue", queue), ("rps", rps))}
    return data, Grid(datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC), 15.0, STEPS)


def _queries(spec) -> list[MetricQuery]:
    return [MetricQuery(ms, {"Pods": "load", "External": "queue", "Object": "rps"}[ms.type],
                        "per-pod" if ms.type == "Pods" else "total", "--query") for ms in spec.metrics]


@pytest.mark.parametrize("name", list(SPECS))
@pytest.mark.parametrize(("seed", "delay", "initial"), [(1, 15.0, 2), (2, 95.0, 5), (3, 240.0, 1)])
def test_fast_replay_decides_as_the_engine(name: str, seed: int, delay: float, initial: int):
    metrics, behavior, lo, hi = SPECS[name]
    raw = {"scaleTargetRef": REF, "minReplicas": lo, "maxReplicas": hi, "metrics": metrics}
    if behavior is not None:
        raw["behavior"] = behavior
    spec = parse_spec(raw, "spec")
    assert supports(spec)
    data, grid = _history(seed)
    queries = _queries(spec)
    config = ControllerConfig(tolerance=0.1 if seed != 2 else 0.2, downscale_stabilization_window=120.0)
    slow = replay(spec, queries, data, grid, initial, delay, config)
    fast = fast_replay(spec, queries, prepare(data, grid), initial, delay, config)
    assert slow.events  # the history makes it scale
    assert [(e.index, e.before, e.after) for e in fast.events] == [(e.index, e.before, e.after) for e in slow.events]
    assert [e.time for e in fast.events] == [e.time for e in slow.events]
    assert np.array_equal(fast.replicas, slow.replicas)
    assert np.array_equal(fast.ready, slow.ready)
    assert fast.failures == slow.failures > 0
    np.testing.assert_allclose(fast.values, slow.values, rtol=1e-12, equal_nan=True)
    np.testing.assert_allclose(fast.ratios, slow.ratios, rtol=1e-12, equal_nan=True)


def test_resource_metrics_stay_with_the_engine():
    cpu = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}
    spec = parse_spec({"scaleTargetRef": REF, "maxReplicas": 5, "metrics": [cpu]}, "spec")
    assert not supports(spec)


def test_specs_with_controls_stay_with_the_engine():
    """Schedules, fallback and activation are decided by the engine alone."""
    base = {"scaleTargetRef": REF, "minReplicas": 1, "maxReplicas": 30, "metrics": [_pods("10")]}
    window = {"name": "day", "start": "0 8 * * *", "duration": "10h", "timeZone": "UTC", "minReplicas": 5}
    assert supports(parse_spec(base, "spec"))
    assert not supports(parse_spec({**base, "schedules": [window]}, "spec"))
    assert not supports(parse_spec({**base, "fallback": {"failureThreshold": 3, "replicas": 4}}, "spec"))


def test_the_load_is_read_from_the_observed_metric_not_its_forecast():
    """A spec may list its forecast first; the exposure still reads the observed metric."""
    from dataclasses import replace

    from adapter.rules import Forecast
    from autoscaler.backtest.exposure import observed_query

    spec = parse_spec({"scaleTargetRef": REF, "maxReplicas": 5, "metrics": [_pods("10"), _pods("10")]}, "spec")
    observed, forecast = _queries(spec)
    forecast = replace(forecast, promql="forecast", forecast=Forecast("rules[0].forecast", "linear", 300.0))
    assert observed_query(spec, [forecast, observed]) is observed
    assert observed_query(spec, [observed, forecast]) is observed
