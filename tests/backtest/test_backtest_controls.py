"""`autoscaler backtest` replays the controls (docs/controls.md) over a real Prometheus: a gap in
the history is a run of failed reads, so the fallback takes over; a schedule window raises the
floor at its instants.

The history (15 s steps, 40 of them; Prometheus started with a 10 s lookback so that a missing
sample is missing, not the previous one carried forward): queue "orders" holds 60 messages at
i0-9 and i30-39 and has no sample at i10-29. Spec: 30 messages per worker (AverageValue),
minReplicas 2, fallback {failureThreshold 4, replicas 6}, no scale-down stabilization, and a
window "burst" (floor 4) opening at i34 for 60 s. No kube-state-metrics series: it starts at 2.

By hand:
  i0-9    60 / 2 = 30 per worker, ratio 1.0                    -> stay 2
  i10-12  no data: failed syncs 1, 2, 3 (below the threshold)   -> stay 2 (the HPA's hold)
  i13     the 4th failed sync in a row: fallback static 6        2 -> 6   (event 1)
  i14-29  still no data: the fallback holds 6                    -> stay 6
  i30     60 / 6 = 10 per worker -> ceil(60 / 30) = 2; 100% per 15 s allows it   6 -> 2 (event 2)
  i31-33  60 / 2 = 30                                            -> stay 2
  i34     the window opens: floor 4 (below minReplicas)          2 -> 4   (event 3)
  i35-37  the metric asks 2, the floor keeps 4                   -> stay 4
  i38     the window closed at i34 + 60 s = i38: the metric's 2  4 -> 2   (event 4)
  i39                                                             -> stay 2
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from autoscaler.backtest import cli
from kubesim.prometheus import PrometheusServer, start_backfilled
from promscaler.times import parse_time

from . import data

STEPS, STEP = 40, 15
GAP = range(10, 30)
EXPECTED = [2] * 13 + [6] * 17 + [2] * 4 + [4] * 4 + [2] * 2
EVENTS = [(13, 2, 6), (30, 6, 2), (34, 2, 4), (38, 4, 2)]


@pytest.fixture(scope="module")
def gappy() -> Iterator[tuple[PrometheusServer, int]]:
    start = (int(time.time()) - 3600) // STEP * STEP
    lines = ["# TYPE queue_messages_ready gauge"]
    lines += [f'queue_messages_ready{{namespace="{data.NS}",queue="orders"}} 60 {start + i * STEP}'
              for i in range(STEPS) if i not in GAP]
    prom = start_backfilled("\n".join([*lines, "# EOF"]) + "\n", extra_args=["--query.lookback-delta=10s"])
    yield prom, start
    prom.close()


def test_gaps_trigger_the_fallback_and_windows_raise_the_floor(gappy, tmp_path: Path) -> None:
    prom, start = gappy
    assert len(EXPECTED) == STEPS
    spec = data.spec("worker", 0, data.QUEUE_METRIC, target="worker", min_replicas=2)
    spec["apiVersion"], spec["kind"] = "promscaler.io/v1alpha1", "HorizontalAutoscaler"
    opens = datetime.fromtimestamp(start + 34 * STEP, UTC)
    spec["spec"]["fallback"] = {"failureThreshold": 4, "replicas": 6}
    spec["spec"]["schedules"] = [{"name": "burst", "timeZone": "UTC", "duration": "60s", "minReplicas": 4,
                                  "start": f"{opens.second} {opens.minute} {opens.hour} {opens.day} {opens.month} *"}]
    path = tmp_path / "worker.yaml"
    path.write_text(yaml.safe_dump(spec))
    report = tmp_path / "report"
    out, err = io.StringIO(), io.StringIO()
    code = cli.main([str(path), "--prometheus-url", prom.url, "--from", str(start),
                     "--to", str(start + (STEPS - 1) * STEP), "--step", "15s", "--report", str(report), "--no-png",
                     "--query", 'queue_messages_ready=sum(queue_messages_ready{namespace="shop",queue="orders"})'],
                    out, err)
    assert code == 0, err.getvalue()
    s = json.loads((report / "summary.json").read_text())["specs"][0]
    got = [(round((parse_time(e["time"]).timestamp() - start) / STEP), e["from"], e["to"]) for e in s["events"]]
    assert got == EVENTS
    assert s["stepsWithoutData"] == len(GAP)
    assert s["stepsInFallback"] == 30 - 13 and s["stepsWithScheduleFloor"] == 4
    assert s["replicaHours"] == round(sum(EXPECTED) * STEP / 3600, 3)
