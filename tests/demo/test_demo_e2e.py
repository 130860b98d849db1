"""`python -m autoscaler demo` end to end: real Prometheus, the adapter and the controller
against the in-process API server; the verdict is read from the report it writes. The test runs
the demo twice as fast as a person sees it (`--time-scale 2`: every timing and the load profile
compressed alike), so it takes about 75 seconds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DURATION = 75  # 150 s of demo time: the end's quiet stretch has room on a loaded machine
TIME_SCALE = 2


def _alive(pid: int, argv: list[str]) -> bool:
    """Is `pid` still the process we started (not a reused pid)?"""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if stat.rsplit(")", 1)[1].split()[0] == "Z":
        return False
    return [c.decode() for c in cmdline if c] == argv


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    report = tmp_path_factory.mktemp("demo") / "report"
    proc = subprocess.run(
        [sys.executable, "-m", "autoscaler", "demo", "--no-tui", "--duration", str(DURATION),
         "--time-scale", str(TIME_SCALE), "--report", str(report)],
        capture_output=True, text=True, cwd=ROOT, timeout=DURATION + 150)
    assert proc.returncode == 0, f"demo failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc, report, json.loads((report / "summary.json").read_text())


def _window(timeline, start, end):
    return [s for s in timeline if start <= s["t"] < end]


def test_prints_where_the_report_is(demo):
    proc, report, _ = demo
    assert str(report / "timeline.png") in proc.stdout and str(report / "summary.json") in proc.stdout
    assert "scaled" in proc.stdout   # plain log lines for each scale event


def test_web_scaled_up_during_the_spike_and_down_after_it(demo):
    _, _, summary = demo
    web = summary["workloads"]["web"]
    spike, fall = max(web["load_changes"], key=lambda c: c["load_after"]), web["load_changes"][-1]
    assert fall["load_after"] < spike["load_after"]
    before = [s["replicas"] for s in _window(web["timeline"], 0, spike["start"])]
    during = [s["replicas"] for s in _window(web["timeline"], spike["start"], fall["start"] + 10)]
    assert max(during) > max(before)
    assert max(during) >= 7                       # 4.5 req/s at 500m per pod asks for 9
    ups = [c for c in web["replica_changes"] if c["to"] > c["from"] and spike["start"] <= c["t"] <= fall["start"] + 10]
    downs = [c for c in web["replica_changes"] if c["to"] < c["from"] and c["t"] > fall["start"]]
    assert ups and downs
    assert web["final_replicas"] == web["min_replicas"] < max(during)
    assert any(lc["seconds"] is not None for lc in web["load_changes"])


def test_worker_scaled_on_the_queue_and_drained_it(demo):
    _, _, summary = demo
    worker = summary["workloads"]["worker"]
    assert worker["peak_queue"] > 2 * worker["target"]
    ups = [c for c in worker["replica_changes"] if c["to"] > c["from"]]
    assert ups and worker["peak_replicas"] >= 4   # 14 msgs/s at 2 per worker needs 7
    timeline = worker["timeline"]
    queued = [s for s in timeline if s["served"] and s["served"] > worker["target"]]
    assert any(s["t"] <= ups[0]["t"] for s in queued)   # the queue grew first, then workers came
    assert timeline[-1]["served"] == 0 and timeline[-1]["truth"] < 1   # drained, as served and in truth
    assert any(c["to"] < c["from"] for c in worker["replica_changes"])
    assert worker["final_replicas"] < worker["peak_replicas"]


def test_both_workloads_end_clearly_back_at_their_minimum(demo):
    """After the last load change each gets back within tolerance (the report says when; a falling
    metric may pass through the band before the scale-down), reaches minReplicas, and stays there
    to the end."""
    _, _, summary = demo
    for name, w in summary["workloads"].items():
        last = w["load_changes"][-1]
        assert last["load_after"] < last["load_before"], name
        assert last["back_within_tolerance_at"] is not None, (name, last)
        after = [s["replicas"] for s in w["timeline"] if s["t"] >= last["end"]]
        assert w["min_replicas"] in after, (name, after)
        tail = after[after.index(w["min_replicas"]):]
        assert set(tail) == {w["min_replicas"]} and len(tail) >= 3, (name, after)  # settled, not passing by
        assert w["final_replicas"] == w["min_replicas"], name


def test_every_replica_change_has_the_controllers_reason(demo):
    _, _, summary = demo
    changes = [c for w in summary["workloads"].values() for c in w["replica_changes"]]
    assert len(changes) >= 4
    for c in changes:
        assert c["reason"].strip(), c
        assert f"New size: {c['to']}" in c["reason"], c


def test_timeline_png_is_a_valid_image(demo):
    from PIL import Image

    _, report, _ = demo
    data = (report / "timeline.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(report / "timeline.png") as img:
        img.load()
        assert img.size[0] >= 1000 and img.size[1] >= 600


def test_no_child_process_survives(demo):
    _, _, summary = demo
    names = {p["name"] for p in summary["processes"]}
    assert {"prometheus", "adapter", "controller"} <= names
    for p in summary["processes"]:
        assert not _alive(p["pid"], p["argv"]), f"{p['name']} (pid {p['pid']}) still running"
    assert _processes_mentioning(summary["workdir"]) == []
