"""The live view and the plain log lines render every field, narrow or wide."""

from __future__ import annotations

from rich.console import Console

from autoscaler.demo import view
from autoscaler.demo.monitor import ReplicaChange, Sample
from autoscaler.demo.scenario import WEB, WORKER, WORKLOADS, Timings

CONDS = [{"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale", "message": ""},
         {"type": "ScalingLimited", "status": "True", "reason": "ScaleDownLimit", "message": ""}]


def _latest():
    return {"web": Sample(t=40, load=4.5, metric=0.62, served=0.62, target=0.5, replicas=7, ready=6, desired=9,
                          conditions=CONDS, reason="SuccessfulRescale: New size: 9"),
            "worker": Sample(t=40, load=14, metric=32.5, served=195, target=30, replicas=6, ready=6, desired=6,
                             reason="ScaleDownLimit: x")}


def _text(width):
    console = Console(width=width, record=True, force_terminal=False)
    changes = {"web": [ReplicaChange(35.9, 5, 7, "New size: 7; reason: pods metric http_requests above target")],
               "worker": []}
    console.print(view.render(WORKLOADS, _latest(), changes, 40, 120, Timings().lines(), width))
    return console.export_text()


def test_render_shows_every_field_at_80_and_170_columns():
    for width in (80, 170):
        text = _text(width)
        for needle in ("t= 40.0s / 120s", "4.50 req/s", "0.62/pod", "queue 195 = 32.5/replica", "500m", "desired 9",
                       "ReadyForNewScale", "ScaleDownLimit", "web 5→7", "rate(...[10s])"):
            assert needle in text, (width, needle)
        assert max(len(line) for line in text.splitlines()) <= width


def test_log_lines():
    s = _latest()
    assert "replicas 7 (ready 6, desired 9)" in view.log_line(WEB, s["web"])
    assert "queue 195 = 32.5/replica (target 30)" in view.log_line(WORKER, s["worker"])
    assert view.change_line("web", ReplicaChange(3.0, 2, 4, "why")) == "[   3.0s] web    scaled 2 -> 4: why"
    missing = Sample(t=1, load=1, metric=None, served=None, target=0.5, replicas=None, ready=None, desired=None,
                     metric_error="503 ServiceUnavailable: prometheus down")
    assert "unavailable (503 ServiceUnavailable: prometheus down)" in view.log_line(WEB, missing)
