"""`autoscaler backtest` and `tune` of a KEDA ScaledObject over a real Prometheus: the trigger's
query is what is replayed, and KEDA's scale to and from zero (activationThreshold,
pollingInterval, cooldownPeriod) decides.

The history (15 s steps, 40 of them; Prometheus with a 10 s lookback, so a missing sample is
missing): queue "orders" has no sample at i0-4, 120 messages at i5-14, 3 at i15-29, 4 at i30-34
and 6 at i35-39. The ScaledObject (KEDA's documentation's shape): threshold 30 (AverageValue),
activationThreshold 5, minReplicaCount 0 and pollingInterval 30 s (the defaults), cooldownPeriod
60, scale-down stabilization 0. No kube-state-metrics series: it starts at minReplicas, 0.

By hand (KEDA: prometheus_scaler.go, scale_scaledobjects.go; the HPA's algorithm every step).
KEDA polls the trigger at the first step and every 30 s after: at the even steps.
  i0-4    no sample: ignoreNullValues (default true) reads 0, not a failure; inactive     -> stay 0
  i5      120 > 5, but KEDA has not polled since i4; the HPA does nothing at zero        -> stay 0
  i6      polled: active, KEDA scales from zero to 1                                       0 -> 1
  i7      the HPA: ceil(120 / 30) = 4, the default scale-up allows 1 + 4                   1 -> 4
  i8-14   120 / 4 = 30 per replica, ratio 1 (last polled active at i14)                   -> stay 4
  i15     the HPA (minReplicas 1): ceil(3 / 30) = 1, no stabilization                       4 -> 1
  i16-19  polled at i16, i18: 3 <= 5 inactive, 30 and 60 s since i14: not more than 60 s   -> stay 1
  i20     polled: inactive 90 s > cooldownPeriod 60 s: KEDA scales to zero                 1 -> 0
  i21-35  3 and 4 <= 5: stays at zero (the HPA alone would start a replica for 4); at i35
          6 > 5 but KEDA has not polled since i34                                          -> stay 0
  i36     polled: 6 > 5 active: KEDA scales from zero to 1                                 0 -> 1
  i37-39  6 / 1 = 6 per replica -> ceil(6 / 30) = 1                                        -> stay 1
"""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from autoscaler.backtest import cli, tunecli
from autoscaler.decision.keda import read_scaled_object
from kubesim.prometheus import PrometheusServer, start_backfilled
from promscaler.times import parse_time

STEPS, STEP = 40, 15
QUEUE = [None] * 5 + [120] * 10 + [3] * 15 + [4] * 5 + [6] * 5
EXPECTED = [0] * 6 + [1] + [4] * 8 + [1] * 5 + [0] * 16 + [1] * 4
EVENTS = [(6, 0, 1), (7, 1, 4), (15, 4, 1), (20, 1, 0), (36, 0, 1)]
QUERY = 'sum(queue_messages_ready{namespace="shop",queue="orders"})'
SCALED_OBJECT: dict[str, Any] = {
    "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
    "metadata": {"name": "orders-worker", "namespace": "shop"},
    "spec": {
        "scaleTargetRef": {"name": "worker"},
        "cooldownPeriod": 60,
        "maxReplicaCount": 10,
        "advanced": {"horizontalPodAutoscalerConfig": {"behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}}}},
        "triggers": [{"type": "prometheus", "metadata": {
            "serverAddress": "http://prometheus.monitoring.svc:9090", "query": QUERY,
            "threshold": "30", "activationThreshold": "5"}}],
    },
}


@pytest.fixture(scope="module")
def queue() -> Iterator[tuple[PrometheusServer, int]]:
    start = (int(time.time()) - 3600) // STEP * STEP
    lines = ["# TYPE queue_messages_ready gauge"]
    lines += [f'queue_messages_ready{{namespace="shop",queue="orders"}} {v} {start + i * STEP}'
              for i, v in enumerate(QUEUE) if v is not None]
    prom = start_backfilled("\n".join([*lines, "# EOF"]) + "\n", extra_args=["--query.lookback-delta=10s"])
    yield prom, start
    prom.close()


def _write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "scaledobject.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_backtest_replays_the_trigger_query_with_kedas_scale_to_zero(queue, tmp_path: Path) -> None:
    prom, start = queue
    assert len(QUEUE) == len(EXPECTED) == STEPS
    report = tmp_path / "report"
    out, err = io.StringIO(), io.StringIO()
    code = cli.main([str(_write(tmp_path, SCALED_OBJECT)), "--prometheus-url", prom.url, "--from", str(start),
                     "--to", str(start + (STEPS - 1) * STEP), "--step", "15s", "--report", str(report), "--no-png"],
                    out, err)
    assert code == 0, err.getvalue()
    s = json.loads((report / "summary.json").read_text())["specs"][0]
    got = [(round((parse_time(e["time"]).timestamp() - start) / STEP), e["from"], e["to"]) for e in s["events"]]
    assert got == EVENTS
    assert s["stepsWithoutData"] == 0   # the gap reads 0, as KEDA's scaler reads an empty result
    assert s["replicaHours"] == round(sum(EXPECTED) * STEP / 3600, 3)


def test_a_gap_is_a_failed_read_with_ignore_null_values_false(queue, tmp_path: Path) -> None:
    """ignoreNullValues: false: KEDA's scaler errors on an empty result; the fallback then decides
    at failureThreshold failed reads in a row (i0, i1: stay 0; i2, the third: fallback 2 replicas)."""
    prom, start = queue
    doc = json.loads(json.dumps(SCALED_OBJECT))
    doc["spec"]["triggers"][0]["metadata"]["ignoreNullValues"] = "false"
    doc["spec"]["fallback"] = {"failureThreshold": 3, "replicas": 2}
    report = tmp_path / "report"
    err = io.StringIO()
    code = cli.main([str(_write(tmp_path, doc)), "--prometheus-url", prom.url, "--from", str(start),
                     "--to", str(start + 9 * STEP), "--step", "15s", "--report", str(report), "--no-png"],
                    io.StringIO(), err)
    assert code == 0, err.getvalue()
    s = json.loads((report / "summary.json").read_text())["specs"][0]
    assert s["stepsWithoutData"] == 5
    got = [(round((parse_time(e["time"]).timestamp() - start) / STEP), e["from"], e["to"]) for e in s["events"]]
    assert got[0] == (2, 0, 2)


def test_tune_recommends_a_scaled_object(queue, tmp_path: Path) -> None:
    prom, start = queue
    report = tmp_path / "tune"
    out, err = io.StringIO(), io.StringIO()
    code = tunecli.main([str(_write(tmp_path, SCALED_OBJECT)), "--prometheus-url", prom.url, "--from", str(start),
                         "--to", str(start + (STEPS - 1) * STEP), "--step", "15s", "--report", str(report),
                         "--no-png", "--no-progress"], out, err)
    assert code == 0, err.getvalue()
    recommended = yaml.safe_load((report / "recommended.yaml").read_text())
    assert recommended["apiVersion"] == "keda.sh/v1alpha1" and recommended["kind"] == "ScaledObject"
    assert recommended["metadata"] == SCALED_OBJECT["metadata"]
    trigger = recommended["spec"]["triggers"][0]
    assert trigger["type"] == "prometheus" and trigger["metadata"]["query"] == QUERY
    summary = json.loads((report / "tune.json").read_text())
    chosen = summary["best"]["knobs"] if summary["recommended"] else summary["given"]["knobs"]
    assert float(trigger["metadata"]["threshold"]) == float(chosen["target"])
    read_scaled_object(recommended)  # KEDA's shape, readable again
    assert "kind: ScaledObject" in out.getvalue()
    # report.html shows the same ScaledObjects, not the HorizontalAutoscaler tune edits
    page = (report / "report.html").read_text()
    shown = json.loads(re.search(r'<script id="report-data" type="application/json">(.*?)</script>', page, re.S)[1])
    assert yaml.safe_load(shown["chosen"]) == recommended
    assert yaml.safe_load(shown["given"])["kind"] == "ScaledObject"


def test_an_unsupported_trigger_is_refused_before_reading(tmp_path: Path) -> None:
    doc = json.loads(json.dumps(SCALED_OBJECT))
    doc["spec"]["triggers"].append({"type": "rabbitmq", "metadata": {"queueName": "orders"}})
    path = _write(tmp_path, doc)
    for main in (cli.main, tunecli.main):
        err = io.StringIO()
        code = main([str(path), "--prometheus-url", "http://127.0.0.1:9", "--from", "now-1h", "--report",
                     str(tmp_path / "r"), "--no-png"], io.StringIO(), err)
        assert code == 2
        assert err.getvalue().splitlines()[-1].endswith(
            f"{path}: spec.triggers[1].type: rabbitmq is not supported (prometheus, cpu, memory)"), err.getvalue()


def _run(tmp_path: Path, doc: dict[str, Any], url: str, start: int, steps: int, *more: str) -> dict[str, Any]:
    report = tmp_path / "report"
    err = io.StringIO()
    code = cli.main([str(_write(tmp_path, doc)), "--prometheus-url", url, "--from", str(start),
                     "--to", str(start + (steps - 1) * STEP), "--step", "15s", "--report", str(report), "--no-png",
                     *more], io.StringIO(), err)
    assert code == 0, err.getvalue()
    return json.loads((report / "summary.json").read_text())["specs"][0]


def _events(s: dict[str, Any], start: int) -> list[tuple[int, int, int]]:
    return [(round((parse_time(e["time"]).timestamp() - start) / STEP), e["from"], e["to"]) for e in s["events"]]


def _doc(**spec: Any) -> dict[str, Any]:
    doc = json.loads(json.dumps(SCALED_OBJECT))
    doc["spec"].update(spec)
    return doc


def test_idle_replica_count_scales_from_and_to_zero_at_min_replica_count(queue, tmp_path: Path) -> None:
    """idleReplicaCount 0, minReplicaCount 2, on the history above, by hand (scale_scaledobjects.go:
    an active trigger scales the idle target to minReplicaCount; the HPA's minReplicas is 2):
      i6   polled, 120 > 5 active: KEDA scales from idle to minReplicaCount           0 -> 2
      i7   the HPA: ceil(120 / 30) = 4, the default scale-up allows 2 + 4               2 -> 4
      i15  ceil(3 / 30) = 1, below the HPA's minReplicas: 2                             4 -> 2
      i20  polled: inactive 90 s > cooldownPeriod 60 s: KEDA scales to idle             2 -> 0
      i36  polled: 6 > 5 active: to minReplicaCount                                     0 -> 2
      i37-39 ceil(6 / 30) = 1, minReplicas 2                                        -> stay 2"""
    prom, start = queue
    s = _run(tmp_path, _doc(idleReplicaCount=0, minReplicaCount=2), prom.url, start, STEPS)
    assert _events(s, start) == [(6, 0, 2), (7, 2, 4), (15, 4, 2), (20, 2, 0), (36, 0, 2)]
    assert s["replicaHours"] == round((2 + 4 * 8 + 2 * 5 + 2 * 4) * STEP / 3600, 3)


def test_initial_cooldown_holds_off_scaling_to_zero_after_creation(queue, tmp_path: Path) -> None:
    """From 3 replicas (--initial-replicas), no trigger active yet (i0-4 read 0). KEDA scales to
    zero only once initialCooldownPeriod (60 s) has passed since the creation, here the replay's
    start; by then (i5) the queue has filled:
      i0   polled: inactive, created 0 s ago, within 60 s: the HPA's ceil(0 / 30), at least 1   3 -> 1
      i2, i4  30 s, 60 s: not more than 60 s                                                  -> stay 1
      i5   120: the HPA, ceil(120 / 30) = 4                                                      1 -> 4
      then as without it: i15 4 -> 1, i20 1 -> 0, i36 0 -> 1.
    Created an hour before (metadata.creationTimestamp), the period is long over: to zero at i0."""
    prom, start = queue
    doc = _doc(initialCooldownPeriod=60)
    s = _run(tmp_path, doc, prom.url, start, STEPS, "--initial-replicas", "3")
    assert _events(s, start) == [(0, 3, 1), (5, 1, 4), (15, 4, 1), (20, 1, 0), (36, 0, 1)]
    doc["metadata"]["creationTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start - 3600))
    s = _run(tmp_path, doc, prom.url, start, STEPS, "--initial-replicas", "3")
    assert _events(s, start)[:3] == [(0, 3, 0), (6, 0, 1), (7, 1, 4)]


# Two queues for a composite metric: orders 0 at i0-3, 100 at i4-11, 4 at i12-23; refunds 0, 20, 4.
ORDERS = [0] * 4 + [100] * 8 + [4] * 12
REFUNDS = [0] * 4 + [20] * 8 + [4] * 12


@pytest.fixture(scope="module")
def queues() -> Iterator[tuple[PrometheusServer, int]]:
    start = (int(time.time()) - 3600) // STEP * STEP
    lines = ["# TYPE queue_messages_ready gauge"]
    for queue_name, values in (("orders", ORDERS), ("refunds", REFUNDS)):
        lines += [f'queue_messages_ready{{namespace="shop",queue="{queue_name}"}} {v} {start + i * STEP}'
                  for i, v in enumerate(values)]
    prom = start_backfilled("\n".join([*lines, "# EOF"]) + "\n", extra_args=["--query.lookback-delta=10s"])
    yield prom, start
    prom.close()


def test_scaling_modifiers_replay_the_composite_metric(queues, tmp_path: Path) -> None:
    """KEDA's docs' "compose average value": formula (orders + refunds)/2, target 30 (AverageValue),
    activationTarget 5; each trigger's threshold (10) and activation (0) play no part. Prometheus
    asked for both, by hand (polled at the even steps):
      i4   polled: (100 + 20) / 2 = 60 > 5 active: KEDA scales from zero to 1            0 -> 1
      i5   the HPA's one metric: ceil(60 / 30) = 2 (the triggers' own would ask 10)       1 -> 2
      i12  polled: (4 + 4) / 2 = 4 <= 5 inactive, active 30 s ago (cooldown 60 s):
           the HPA, ceil(4 / 30) = 1                                                        2 -> 1
      i16  polled: inactive 90 s > 60 s: KEDA scales to zero (4 > 0 would keep each
           trigger active)                                                                 1 -> 0"""
    prom, start = queues
    s = _run(tmp_path, _composite_doc(), prom.url, start, len(ORDERS))
    assert _events(s, start) == [(4, 0, 1), (5, 1, 2), (12, 2, 1), (16, 1, 0)]
    assert s["stepsWithoutData"] == 0
    # above its target: the composite metric, per replica, over 30 (tolerance 0.1): 60 / 1 at i4
    # and i5 (before the decision, at least 1 replica); 60 / 2 = 30 at i6-11 is on target
    assert s["secondsAboveOwnTargets"] == 2 * STEP
    # the exposure reads the load the HPA sees, the composite metric's, per ready pod (pods ready
    # 30 s after the scale-up) against 30 x 1.1: 60 with none ready at i4, i5, 60 / 1 at i6, 30 / 2
    # from i7 on; 4 with none ready from i17 to the end: 10 steps, 2 rises, the last one open
    exposure = s["exposure"]
    assert (exposure["referenceMetric"], exposure["referenceTarget"]) == ("External composite-metric", 30.0)
    assert exposure["secondsUnderProvisioned"] == 10 * STEP
    assert exposure["timeToCapacitySeconds"] == {"rises": 2, "median": 3 * STEP, "max": 3 * STEP, "open": 1}


def _composite_doc() -> dict[str, Any]:
    doc = _doc()
    trigger = doc["spec"]["triggers"][0]
    doc["spec"]["triggers"] = [
        {**trigger, "name": name, "metadata": {
            **trigger["metadata"], "threshold": "10", "activationThreshold": "0",
            "query": f'sum(queue_messages_ready{{namespace="shop",queue="{name}"}})'}}
        for name in ("orders", "refunds")]
    doc["spec"]["advanced"]["scalingModifiers"] = {"formula": "(orders + refunds)/2", "target": "30",
                                                   "activationTarget": "5"}
    return doc


def test_tune_chooses_the_composite_target(queues, tmp_path: Path) -> None:
    """With scalingModifiers the HPA's target is scalingModifiers.target: tune tries fractions of
    it (the triggers' thresholds play no part) and writes the chosen one there."""
    prom, start = queues
    doc = _composite_doc()
    report = tmp_path / "tune"
    err = io.StringIO()
    code = tunecli.main([str(_write(tmp_path, doc)), "--prometheus-url", prom.url, "--from", str(start),
                         "--to", str(start + (len(ORDERS) - 1) * STEP), "--step", "15s", "--report", str(report),
                         "--no-png", "--no-progress"], io.StringIO(), err)
    assert code == 0, err.getvalue()
    summary = json.loads((report / "tune.json").read_text())
    assert summary["given"]["knobs"]["target"] == "30"
    # 0.7 x 30 = 21 is tried, and replays otherwise than 30 (ceil(60 / 21) = 3 replicas, not 2): the
    # knob is the composite target, not a trigger's threshold
    by_target = {row["knobs"]["target"]: row["chosenOn"]["replicaHours"] for row in summary["all"]
                 if row["knobs"]["scaleDownPolicy"] == "given" and row["knobs"]["scaleDownWindowSeconds"] is None}
    assert by_target["21"] > by_target["30"], by_target
    chosen = summary["best"]["knobs"] if summary["recommended"] else summary["given"]["knobs"]
    recommended = yaml.safe_load((report / "recommended.yaml").read_text())
    assert float(recommended["spec"]["advanced"]["scalingModifiers"]["target"]) == float(chosen["target"])
    assert [t["metadata"]["threshold"] for t in recommended["spec"]["triggers"]] == ["10", "10"]
    assert read_scaled_object(recommended).hpa["spec"]["metrics"][0]["external"]["metric"]["name"] == \
        "composite-metric"


def test_tune_refuses_a_composite_target_behind_a_container_metric(tmp_path: Path) -> None:
    doc = _composite_doc()
    doc["spec"]["minReplicaCount"] = 1
    doc["spec"]["triggers"].append({"type": "memory", "metricType": "AverageValue",
                                    "metadata": {"value": "512Mi", "containerName": "app"}})
    path = _write(tmp_path, doc)
    err = io.StringIO()
    code = tunecli.main([str(path), "--prometheus-url", "http://127.0.0.1:9", "--from", "now-1h", "--report",
                         str(tmp_path / "r"), "--no-png"], io.StringIO(), err)
    assert code == 2
    assert err.getvalue().strip() == (f"autoscaler tune: {path}: spec.advanced.scalingModifiers: tune chooses the "
                                      "composite target only when no cpu/memory trigger has a containerName "
                                      "(its metric sorts first)")


def test_tune_keeps_idle_replica_count_and_initial_cooldown(queue, tmp_path: Path) -> None:
    """tune replays its candidates with them (the threshold and behavior are what it changes) and
    writes them back as given (before, tune refused both)."""
    prom, start = queue
    doc = _doc(idleReplicaCount=0, minReplicaCount=2, initialCooldownPeriod=60)
    report = tmp_path / "tune"
    err = io.StringIO()
    code = tunecli.main([str(_write(tmp_path, doc)), "--prometheus-url", prom.url, "--from", str(start),
                         "--to", str(start + (STEPS - 1) * STEP), "--step", "15s", "--report", str(report),
                         "--no-png", "--no-progress"], io.StringIO(), err)
    assert code == 0, err.getvalue()
    recommended = yaml.safe_load((report / "recommended.yaml").read_text())
    assert (recommended["spec"]["idleReplicaCount"], recommended["spec"]["minReplicaCount"],
            recommended["spec"]["initialCooldownPeriod"]) == (0, 2, 60)
    read_scaled_object(recommended)
