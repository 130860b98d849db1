"""Discovery forgets series that stopped: a metric is listed only while it has samples within
`--metrics-max-age`, in both discovery modes, against a real Prometheus whose index still holds
the stopped series (they share a block with fresh ones), and against a real VictoriaMetrics, whose
`/api/v1/series` lists a series stopped minutes ago (its index works by the day)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from kubesim.prometheus import PrometheusServer, start_backfilled
from kubesim.victoriametrics import VictoriaMetricsServer
from tests.support import wait_for

from .conftest import AdapterProcess

RULES = """
rules:
- seriesQuery: '{__name__=~"app_.*",namespace!="",pod!=""}'
  resources: {template: "<<.Resource>>"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
externalRules:
- seriesQuery: '{__name__=~"queue_.*",queue!=""}'
  resources: {namespaced: false}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'
"""


def _series(now: int) -> list[tuple[str, str, list[int]]]:
    """(name, labels, sample times): two series stopped 5 minutes ago beside two fresh ones."""
    return [(name, labels, list(range(now - 1200, until, 15))) for name, labels, until in (
        ("app_fresh", 'namespace="a",pod="p"', now + 1800),
        ("app_stopped", 'namespace="a",pod="q"', now - 300),     # stopped 5 minutes ago
        ("queue_fresh", 'queue="x"', now + 1800),
        ("queue_stopped", 'queue="y"', now - 300),
    )]


def _openmetrics(now: int) -> str:
    lines = []
    for name, labels, times in _series(now):
        lines.append(f"# TYPE {name} gauge")
        lines += [f"{name}{{{labels}}} 1 {t}" for t in times]
    return "\n".join([*lines, "# EOF"]) + "\n"


def _start_victoriametrics(now: int) -> VictoriaMetricsServer:
    vm = VictoriaMetricsServer().start()
    try:
        vm.import_prometheus("".join(f"{name}{{{labels}}} 1 {t * 1000}\n" for name, labels, times in _series(now)
                                     for t in times))
        return vm
    except BaseException:
        vm.close()
        raise


def _one_block(now: int) -> str:
    """promtool's shortest block range (2h x 3^k, aligned to the epoch) with no block boundary
    between the series' first and last samples, so the stopped series shares a block with the fresh
    ones at any time of day (with 2h blocks, a boundary in the last 5 minutes, just after every even
    hour, put them in different blocks)."""
    hours = 2
    while (now - 1200) // (hours * 3600) != (now + 1800) // (hours * 3600):
        hours *= 3
    return f"{hours}h"


@pytest.fixture(scope="module", params=["prometheus", "victoriametrics"])
def prom(request) -> Iterator[PrometheusServer | VictoriaMetricsServer]:
    """Each backend, its index holding the stopped series (VictoriaMetrics' index works by the day)."""
    now = int(time.time())
    server = (start_backfilled(_openmetrics(now), _one_block(now)) if request.param == "prometheus"
              else _start_victoriametrics(now))
    yield server
    server.close()


def test_the_index_still_has_the_stopped_series(prom):
    params = {"match[]": '{namespace="a"}', "start": time.time() - 60, "end": time.time()}
    names = wait_for(lambda: set(httpx.get(f"{prom.url}/api/v1/label/__name__/values", params=params).json()["data"]))
    assert names == {"app_fresh", "app_stopped"}  # what kept them listed


@pytest.mark.parametrize("mode", ["aggregate", "series"])
@pytest.mark.parametrize("max_age, stopped_listed", [("60s", False), ("15m", True)])
def test_stopped_series_leave_discovery_after_max_age(prom, tmp_path, mode, max_age, stopped_listed):
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    with AdapterProcess("--prometheus-url", prom.url, "--config", str(rules), "--metrics-discovery", mode,
                        "--metrics-max-age", max_age).wait_ready() as a:
        custom = {r["name"] for r in a.get("/apis/custom.metrics.k8s.io/v1beta1").json()["resources"]}
        external = {r["name"] for r in a.get("/apis/external.metrics.k8s.io/v1beta1").json()["resources"]}
    assert {"pods/app_fresh", "namespaces/app_fresh"} <= custom and "queue_fresh" in external
    assert ("pods/app_stopped" in custom) is stopped_listed
    assert ("queue_stopped" in external) is stopped_listed
