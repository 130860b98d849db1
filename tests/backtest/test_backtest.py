"""`autoscaler backtest` over a real Prometheus holding a known history, against hand-computed replays.

Spec `short` (scale-down stabilization 30 s) and `long` (300 s), target 10 per pod, start-up
delay 15 s (new pods are ready at the next step), 2 replicas at the start (kube-state-metrics).
The reasoning, step by step (i: observed total -> what the engine sees):

short:
  i0-3   total 20 over 2 ready pods = 10/pod, ratio 1.0           -> stay 2
  i4     total 40 over 2 = 20, ratio 2 -> 4 (limit max(2+4, 2x2) = 6)   2 -> 4   (event 1)
  i5-7   40 over 4 ready = 10                                      -> stay 4
  i8     80 over 4 = 20, ratio 2 -> 8 (limit max(4+4, 8) = 8)     4 -> 8   (event 2)
  i9     80 over 8 = 10                                            -> stay 8
  i10    10 over 8 = 1.25 -> 1, but t9's 8 is in the 30 s window  -> stay 8
  i11    the window (after t9) holds 1 and 1; 100% per 15 s allows it  8 -> 1  (event 3)
  i12-13 10 over 1 = 10                                            -> stay 1
  i14    80 over 1 = 80 -> 8, limit max(1+4, 2) = 5                1 -> 5   (event 4)
  i15    80 over 5 = 16 -> ceil(1.6 x 5) = 8; t14's event is not after the 15 s cutoff: limit 10
                                                                    5 -> 8   (event 5)
  i16    10 over 8 -> 1, t15's 8 in the window                     -> stay 8
  i17    window holds 1 and 1                                       8 -> 1   (event 6)
  i18-23 10 over 1 = 10                                            -> stay 1
long: as short until i10; then t9's recommendation of 8 stays in the 300 s window to the end, and
  at i14/i15 80 over 8 ready pods is 10 per pod: 2 events, 8 replicas from i8 on.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from autoscaler.backtest import cli, read
from autoscaler.backtest import history as history_mod
from autoscaler.decision import engine
from promscaler.times import parse_time

from . import data

SHORT_REPLICAS = [2] * 4 + [4] * 4 + [8] * 3 + [1] * 3 + [5] + [8] * 2 + [1] * 7
LONG_REPLICAS = [2] * 4 + [4] * 4 + [8] * 16
SHORT_EVENTS = [(4, 2, 4), (8, 4, 8), (11, 8, 1), (14, 1, 5), (15, 5, 8), (17, 8, 1)]


def _files(tmp_path: Path) -> tuple[Path, Path, Path]:
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(data.RULES))
    short, long = tmp_path / "short.yaml", tmp_path / "long.yaml"
    short.write_text(yaml.safe_dump(data.spec("short", 30)))
    long.write_text(yaml.safe_dump(data.spec("long", 300)))
    return rules, short, long


def _run(history, tmp_path: Path, *extra: str) -> tuple[int, str, str, dict]:
    prom, start = history
    tmp_path.mkdir(exist_ok=True)
    rules, short, long = _files(tmp_path)
    report = tmp_path / "report"
    out, err = io.StringIO(), io.StringIO()
    code = cli.main([str(short), str(long), "--prometheus-url", prom.url, "--rules", str(rules),
                     "--from", str(start), "--to", str(start + (data.STEPS - 1) * data.STEP), "--step", "15s",
                     "--startup-delay", "15s", "--report", str(report), *extra], out, err)
    summary = json.loads((report / "summary.json").read_text()) if code == 0 else {}
    return code, out.getvalue(), err.getvalue(), summary



def test_replay_matches_the_hand_computed_steps(history, tmp_path: Path):
    code, out, err, summary = _run(history, tmp_path, "--no-png")
    assert code == 0, err
    short, long = summary["specs"]
    assert short["decisions"] == long["decisions"] == data.STEPS
    _prom, start = history

    def steps(s: dict) -> list[tuple[int, int, int]]:
        return [(round((parse_time(e["time"]).timestamp() - start) / data.STEP), e["from"], e["to"])
                for e in s["events"]]

    def replicas(s: dict) -> list[int]:  # per step, from the initial 2 and the events
        out, current, events = [], 2, steps(s)
        for i in range(data.STEPS):
            current = next((to for at, _, to in events if at == i), current)
            out.append(current)
        return out

    assert steps(short) == SHORT_EVENTS
    assert replicas(short) == SHORT_REPLICAS and replicas(long) == LONG_REPLICAS
    assert short["scaleEvents"] == 6 and (short["scaleUps"], short["scaleDowns"]) == (4, 2)
    assert steps(long) == [(4, 2, 4), (8, 4, 8)]
    assert long["scaleEvents"] == 2 < short["scaleEvents"]  # the larger window: fewer events
    assert short["replicaHours"] == round(sum(SHORT_REPLICAS) * 15 / 3600, 3)
    assert long["replicaHours"] == round(sum(LONG_REPLICAS) * 15 / 3600, 3)
    assert short["maxReplicas"] == long["maxReplicas"] == 8
    # the metric as the engine saw it, above 10 x 1.1 per pod at i4, i8, i14, i15 (short) and i4, i8 (long)
    assert short["secondsAboveOwnTargets"] == 60 and long["secondsAboveOwnTargets"] == 30
    # exposure: the observed total over the ready pods (a new pod is ready at the next step, a removed
    # one goes at once, so ready at i = the replicas decided at i-1): short 20/2, 40/2 (i4), 40/4, 80/4
    # (i8), 80/8, 10/8, 10/1, 80/1 (i14), 80/5 (i15), 10/8, 10/1: above 11 at i4, i8, i14-15: rises
    # of 15 s, 15 s and 30 s; long keeps 8 pods from i8, so 80/8 = 10 at i14-15: two rises of 15 s
    assert short["exposure"] == {
        "referenceMetric": "Pods inflight_requests", "referenceTarget": 10.0, "tolerance": 0.1,
        "referenceFrom": "short.yaml (short)'s first metric's target and scale-up tolerance",
        "secondsUnderProvisioned": 60.0,
        "timeToCapacitySeconds": {"rises": 3, "median": 15.0, "max": 30.0, "open": 0}}
    assert long["exposure"]["secondsUnderProvisioned"] == 30.0
    assert long["exposure"]["timeToCapacitySeconds"] == {"rises": 2, "median": 15.0, "max": 15.0, "open": 0}
    # the actual replicas came from kube-state-metrics: 2 then 4 pods
    assert long["actual"]["maxReplicas"] == 4
    assert "kube_deployment_status_replicas" in long["actual"]["source"]
    # the PromQL is the rule's, with the adapter's matchers for the namespace and the target's pods
    promql = short["metrics"][0]["promql"]
    assert promql == 'sum(inflight_requests{namespace="shop",pod=~"web-[a-z0-9]+-[a-z0-9]+"}) by (pod)'
    assert short["metrics"][0]["source"] == "rules[0]"
    assert "replica-hours" in out and "scale events (up/down)" in out and "6 (4/2)" in out and "2 (2/0)" in out
    assert "under-provisioned (load per ready pod > reference)" in out and "time above its own targets" in out


def test_the_engine_s_words_are_formatted_for_the_report_only(history, tmp_path: Path, monkeypatch):
    """report.html shows each scale event's explanation; without it (as in tune's replays) none is formatted."""
    calls: list[int] = []
    explain = engine._explain

    def counted(*args):
        calls.append(args[-2])  # the replicas the decision scales to
        return explain(*args)

    monkeypatch.setattr(engine, "_explain", counted)
    assert _run(history, tmp_path / "bare", "--no-png", "--no-html")[0] == 0
    assert calls == []
    assert _run(history, tmp_path / "html", "--no-png")[0] == 0
    assert calls == [to for _, _, to in SHORT_EVENTS] + [4, 8]  # short's events, then long's
    page = (tmp_path / "html" / "report" / "report.html").read_text()
    assert "result: scale from 2 to 4 replicas" in page


def test_the_target_s_pods_are_its_controller_s_as_the_adapter_picks_them(history, tmp_path: Path):
    """Deployment `web` beside Deployment `web-canary`: backtest's default pods are the ones the
    adapter's Pods forecast reads (`workload_pattern` of web's pods now), so only web's are counted:
    2 pods, then 4 from step 8, and their sum (the canary's 2 pods at 300 each are left out)."""
    from adapter.forecast import workload_pattern
    from autoscaler.backtest.specs import load_specs

    prom, start = history
    rules, short, _ = _files(tmp_path)
    args = cli._parser().parse_args([str(short), "--prometheus-url", prom.url, "--rules", str(rules),
                                     "--from", str(start), "--to", str(start + (data.STEPS - 1) * data.STEP)])
    h = read.read_histories(args, load_specs(str(short)), io.StringIO())
    query = h.plans[0].queries[0]
    assert f'pod=~"{workload_pattern(data.pods_at(8))}"' in query.promql
    observed = h.data[query.promql]
    assert observed.count.tolist() == [len(data.pods_at(i)) for i in range(data.STEPS)]
    assert observed.total.tolist() == data.totals()


@pytest.mark.parametrize(("kind", "pods"), [
    ("Deployment", ["web-7c9d8f6b5-x2x7z", "web-59dbf8c7f4-m6n2s"]), ("StatefulSet", ["web-0", "web-12"]),
    ("ReplicaSet", ["web-x2x7z"]), ("DaemonSet", ["web-b4kqp"]), ("Job", ["web-m6n2s"])])
def test_one_naming_rule_from_the_pods_or_from_the_controller(kind: str, pods: list[str]):
    from adapter.forecast import workload_pattern
    from autoscaler.backtest.plan import pod_regex

    assert pod_regex(kind, "web", None) == workload_pattern(pods)
    assert pod_regex(kind, "web", "web-.*") == "web-.*"


def test_exposure_against_a_reference_target(history, tmp_path: Path):
    """--reference-target 8: the band is 8.8 per pod for both specs. short's load per ready pod
    (see above) is 10 at i0-3, 20, 10 x3, 20, 10 (i9): above from i0 to i9 (150 s); 1.25 at
    i10-11; 10, 10, 80, 16 at i12-15 (60 s); 1.25 at i16-17; 10 from i18 to the end (90 s, still
    open). long: 10 or more at i0-9 (150 s) and 80/8 = 10 at i14-15 (30 s), 10/8 otherwise."""
    code, _, err, summary = _run(history, tmp_path, "--no-png", "--reference-target", "8")
    assert code == 0, err
    short, long = summary["specs"]
    assert short["exposure"]["referenceTarget"] == 8.0
    assert short["exposure"]["secondsUnderProvisioned"] == 300.0
    assert short["exposure"]["timeToCapacitySeconds"] == {"rises": 3, "median": 105.0, "max": 150.0, "open": 1}
    assert long["exposure"]["secondsUnderProvisioned"] == 180.0
    assert long["exposure"]["timeToCapacitySeconds"] == {"rises": 2, "median": 90.0, "max": 150.0, "open": 0}
    # the spec's own figure is unchanged by the reference
    assert short["secondsAboveOwnTargets"] == 60
    code, _, err, _ = _run(history, tmp_path, "--no-png", "--reference-target", "lots")
    assert code == 2 and err.count("\n") == 1 and "--reference-target" in err


def test_chunked_fetch_gives_the_same_replay(history, tmp_path: Path, monkeypatch):
    monkeypatch.setattr(history_mod, "CHUNK_POINTS", 5)  # 24 steps in 5 chunks
    code, _, err, summary = _run(history, tmp_path, "--no-png")
    assert code == 0, err
    short, long = summary["specs"]
    assert [(e["from"], e["to"]) for e in short["events"]] == [(b, a) for _, b, a in SHORT_EVENTS]
    assert long["scaleEvents"] == 2 and short["stepsWithoutData"] == 0


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_png_progress_and_errors(history, tmp_path: Path):
    prom, start = history
    rules, short, long = _files(tmp_path)
    err = _Terminal()
    code = cli.main([str(short), str(long), "--prometheus-url", prom.url, "--rules", str(rules), "--from", str(start),
                     "--to", str(start + (data.STEPS - 1) * data.STEP), "--report", str(tmp_path / "report")],
                    io.StringIO(), err)
    assert code == 0, err.getvalue()
    png = tmp_path / "report" / "backtest.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    prom, _start = history
    out, err_buf = io.StringIO(), io.StringIO()
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**data.spec("bad", 30), "kind": "Deployment"}))
    assert cli.main([str(bad), "--prometheus-url", prom.url, "--from", "now-1h"], out, err_buf) == 2
    assert err_buf.getvalue().count("\n") == 1 and "bad.yaml: kind" in err_buf.getvalue()

    err_buf = io.StringIO()
    _, short, _ = _files(tmp_path)
    assert cli.main([str(short), "--prometheus-url", prom.url, "--from", "now-1h"], out, err_buf) == 1
    assert "Pods metric inflight_requests" in err_buf.getvalue() and "--rules" in err_buf.getvalue()


def test_external_metric_from_the_rules_and_given_explicitly(history, tmp_path: Path):
    """Queue "orders" holds 60 messages, then 150 from step 12; 30 per worker wanted; no
    kube-state-metrics series for `worker`, so it starts at minReplicas 2.
    i0-11: 60 / 2 = 30 -> stay 2. i12: 150 / 2 = 75 -> ceil(150 / 30) = 5 (limit 6) -> 2 -> 5.
    i13-: 150 / 5 (the scale's status counts the starting pods) = 30 -> stay 5."""
    prom, start = history
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(data.RULES))
    worker = tmp_path / "worker.yaml"
    worker.write_text(yaml.safe_dump(data.spec("worker", 30, data.QUEUE_METRIC, target="worker", min_replicas=2)))
    explicit = 'sum(queue_messages_ready{namespace="shop",queue="orders"})'
    summaries = []
    for extra in (["--rules", str(rules)], ["--query", f"queue_messages_ready={explicit}"]):
        report = tmp_path / extra[0].strip("-")
        out, err = io.StringIO(), io.StringIO()
        code = cli.main([str(worker), "--prometheus-url", prom.url, "--from", str(start),
                         "--to", str(start + (data.STEPS - 1) * data.STEP), "--report", str(report), "--no-png",
                         *extra], out, err)
        assert code == 0, err.getvalue()
        summaries.append(json.loads((report / "summary.json").read_text())["specs"][0])
    from_rules, given = summaries
    assert from_rules["metrics"][0]["promql"] == 'sum(queue_messages_ready{queue="orders",namespace="shop"}) by ()'
    assert from_rules["metrics"][0]["source"] == "externalRules[0]" and given["metrics"][0]["source"] == "--query"
    for s in summaries:
        assert [(e["from"], e["to"]) for e in s["events"]] == [(2, 5)]
        assert parse_time(s["events"][0]["time"]).timestamp() == start + 12 * data.STEP
        assert s["replicaHours"] == round((12 * 2 + 12 * 5) * 15 / 3600, 3)
        assert "actual" not in s
        # the engine saw 150 / 5 replicas = 30 at i13 (the scale's status counts the starting pods):
        # above its own target at i12 only; but the 3 new pods are ready 30 s after i12, so the load
        # per ready pod is 150 / 2 = 75 at i12 and i13: 30 s under-provisioned, one rise of 30 s
        assert s["secondsAboveOwnTargets"] == 15
        assert s["exposure"]["secondsUnderProvisioned"] == 30
        assert s["exposure"]["timeToCapacitySeconds"] == {"rises": 1, "median": 30.0, "max": 30.0, "open": 0}


def test_resource_utilization_given_explicitly_replays_like_the_pods_spec(history, tmp_path: Path):
    """CPU as inflight / 10 cores per pod, 2-core requests, 50% wanted: 1 core (10 requests) per
    pod, the same target as the Pods spec, so the same six events as `short`."""
    prom, start = history
    cpu = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}
    path = tmp_path / "cpu.yaml"
    path.write_text(yaml.safe_dump(data.spec("web", 30, cpu)))
    report = tmp_path / "cpu"
    out, err = io.StringIO(), io.StringIO()
    query = 'cpu=sum(inflight_requests{namespace="shop",pod=~"web-[a-z0-9]+-[a-z0-9]+"}) by (pod) / 10'
    code = cli.main([str(path), "--prometheus-url", prom.url, "--query", query, "--pod-requests", "cpu=2",
                     "--from", str(start), "--to", str(start + (data.STEPS - 1) * data.STEP), "--startup-delay", "15s",
                     "--report", str(report), "--no-png"], out, err)
    assert code == 0, err.getvalue()
    s = json.loads((report / "summary.json").read_text())["specs"][0]
    assert [(e["from"], e["to"]) for e in s["events"]] == [(b, a) for _, b, a in SHORT_EVENTS]
    assert s["secondsAboveOwnTargets"] == 60  # ratios against 50% of the request
    assert s["exposure"]["referenceTarget"] == 1.0  # 50% of 2 cores
    assert s["exposure"]["secondsUnderProvisioned"] == 60
    # without requests a Utilization target cannot be computed: every step fails, nothing scales
    code = cli.main([str(path), "--prometheus-url", prom.url, "--query", query, "--from", str(start),
                     "--to", str(start + (data.STEPS - 1) * data.STEP), "--report", str(report), "--no-png"],
                    io.StringIO(), io.StringIO())
    assert code == 0
    assert json.loads((report / "summary.json").read_text())["specs"][0]["scaleEvents"] == 0
