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


def _changes():
    return {"web": [ReplicaChange(35.9, 5, 7, "New size: 7; reason: pods metric http_requests above target"),
                    ReplicaChange(41.0, 7, 9, "New size: 9; reason: pods metric http_requests above target")],
            "worker": [ReplicaChange(20.0, 1, 3, "New size: 3; reason: external metric queue_messages_ready high"),
                       ReplicaChange(30.0, 3, 6, "New size: 6; reason: external metric queue_messages_ready high"),
                       ReplicaChange(39.0, 6, 5, "New size: 5; reason: All metrics below target")]}


def _text(width, height=60):
    console = Console(width=width, height=height, record=True, force_terminal=False)
    console.print(view.render(WORKLOADS, _latest(), _changes(), 40, 120, Timings().lines(), width, height))
    return console.export_text()


def test_render_shows_every_field_at_80_and_170_columns():
    for width in (80, 170):
        text = _text(width)
        for needle in ("t= 40.0s / 120s", "4.50 req/s", "620m / 500m per pod", "32.5 / 30 per replica (queue 195)",
                       "desired 9", "ReadyForNewScale", "ScaleDownLimit", "web 7→9", "rate(...[10s])"):
            assert needle in text, (width, needle)
        assert max(len(line) for line in text.splitlines()) <= width


def test_the_live_view_fits_80_by_24_with_the_scale_events_visible():
    text = _text(80, 24)
    lines = text.splitlines()
    assert len(lines) <= 24, text
    assert "scale events" in text
    assert "web 7→9" in text and "worker 6→5" in text  # the latest events, not cut off
    assert "Ctrl-C stops" in lines[-1]  # the frame's bottom border is on screen


def test_metric_is_shown_in_the_targets_unit():
    assert view.in_target_unit(0.54, "500m") == "540m"
    assert view.in_target_unit(18.14, "30") == "18.1"
    assert view.in_target_unit(30.0, "30") == "30"


def test_log_lines():
    s = _latest()
    assert "replicas 7 (ready 6, desired 9)" in view.log_line(WEB, s["web"])
    assert "620m / 500m per pod" in view.log_line(WEB, s["web"])
    assert "32.5 / 30 per replica (queue 195)" in view.log_line(WORKER, s["worker"])
    assert view.change_line("web", ReplicaChange(3.0, 2, 4, "why")) == "[   3.0s] web    scaled 2 -> 4: why"
    missing = Sample(t=1, load=1, metric=None, served=None, target=0.5, replicas=None, ready=None, desired=None,
                     metric_error="503 ServiceUnavailable: prometheus down")
    assert "unavailable (503 ServiceUnavailable: prometheus down)" in view.log_line(WEB, missing)
