"""`backtest` asks for a forecast metric with the adapter's forecast PromQL, as range data: over a
real Prometheus holding the adapter tests' known history (yesterday and today, `forecast_data`),
each step's value is the one worked out by hand for the moment of that step."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import numpy as np
import pytest

from adapter.forecast import forecast_query
from adapter.naming import compile_rules
from adapter.rules import parse_rules
from autoscaler.backtest.history import Fetcher, Grid
from autoscaler.backtest.queries import metric_query
from autoscaler.decision.spec import parse_spec
from kubesim.prometheus import PrometheusServer
from tests.adapter import forecast_data as fd

STEPS = 6  # T0 - 5m .. T0, one a minute: inside every hand-worked window


@pytest.fixture(scope="module")
def known() -> Iterator[tuple[PrometheusServer, int]]:
    t0 = fd.start_time()
    with fd.backfilled(t0) as prom:
        yield prom, t0


def fetched(known: tuple[PrometheusServer, int], metric: dict) -> tuple[str, str, np.ndarray, np.ndarray]:
    """(shape, PromQL, each step's value, each step's Unix time) of one spec metric (a forecast)."""
    prom, t0 = known
    spec = parse_spec({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                       "maxReplicas": 10, "metrics": [metric]})
    fetcher = Fetcher(prom.url)
    q = metric_query(spec.metrics[0], "web", "web-[a-z0-9]+-[a-z0-9]+", compile_rules(parse_rules(fd.RULES)),
                     fetcher.series_names, {})
    assert q.forecast is not None and q.promql == forecast_query(q.forecast, q.base)  # told from an observed load
    grid = Grid(datetime.fromtimestamp(t0 - 300, UTC), 60, STEPS)
    return q.shape, q.promql, fetcher.fetch([q.promql], grid)[q.promql].total, grid.times


def pods(name: str) -> dict:
    return {"type": "Pods", "pods": {"metric": {"name": name}, "target": {"type": "AverageValue", "averageValue": 10}}}


def test_pods_forecast_is_the_total_the_adapter_divides(known):
    shape, promql, values, _ = fetched(known, pods("inflight_forecast"))
    assert shape == "per-pod" and promql.startswith("(last_over_time(")
    total = sum(fd.WEB_AFTER.values()) * sum(fd.WEB_TODAY.values()) / sum(fd.WEB_BEFORE.values())
    assert values.tolist() == pytest.approx([total] * STEPS)  # 30 * 15 / 10, before the load model spreads it


def test_linear_forecasts_are_the_line_horizon_after_each_step(known):
    t0 = known[1]
    _, _, values, times = fetched(known, pods("backlog_trend"))
    expected = [sum(fd.backlog(pod)(t - t0 + fd.HORIZON_LINEAR) for pod in fd.WEB_NOW) for t in times]
    assert values.tolist() == pytest.approx(expected)
    external = {"type": "External", "external": {"metric": {"name": "stream_lag_forecast",
                                                            "selector": {"matchLabels": {"stream": "up"}}},
                                                 "target": {"type": "Value", "value": 100}}}
    shape, _, values, times = fetched(known, external)
    assert shape == "total"
    assert values.tolist() == pytest.approx([fd.lag_up(t - t0 + fd.HORIZON_LINEAR) for t in times])


def test_object_and_external_seasonal_forecasts_over_history(known):
    obj = {"type": "Object", "object": {"metric": {"name": "service_load_forecast"},
                                        "describedObject": {"apiVersion": "v1", "kind": "Service", "name": "api"},
                                        "target": {"type": "Value", "value": 100}}}
    assert fetched(known, obj)[2].tolist() == pytest.approx([fd.SERVICE_SEASONAL] * STEPS)
    external = {"type": "External", "external": {"metric": {"name": "queue_depth_seasonal",
                                                            "selector": {"matchLabels": {"queue": "orders"}}},
                                                 "target": {"type": "Value", "value": 100}}}
    assert fetched(known, external)[2].tolist() == pytest.approx([fd.QUEUE_SEASONAL] * STEPS)


def test_missing_history_is_no_data_not_zero(known):
    external = {"type": "External", "external": {"metric": {"name": "queue_depth_seasonal",
                                                            "selector": {"matchLabels": {"queue": "new"}}},
                                                 "target": {"type": "Value", "value": 100}}}
    assert np.isnan(fetched(known, external)[2]).all()
