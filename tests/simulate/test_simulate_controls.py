"""`simulate` with the opt-in controls (docs/controls.md): the scenarios of
examples/worker/scenarios/controls.yaml, varied one field at a time. Expected counts are the
rules worked by hand (each case says how)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

from .simulate_run import run_doc

SCENARIOS = list(yaml.safe_load_all(
    (Path(__file__).resolve().parents[2] / "examples/worker/scenarios/controls.yaml").read_text()))
FALLBACK, PAUSE, SCHEDULE, ACTIVATION = (copy.deepcopy(d) for d in SCENARIOS)
STDIN = "autoscaler simulate: <stdin>: "  # how an error about a scenario on stdin begins


def decide(doc: dict[str, Any]) -> dict[str, Any]:
    rc, out, err = run_doc(doc, "-o", "json")
    assert rc == 0, err
    return json.loads(out)


def test_fallback_counts_the_failures_so_far() -> None:
    doc = copy.deepcopy(FALLBACK)
    doc["history"]["failures"] = 1  # this is the 2nd failed sync of 3: hold 2, as the HPA does
    out = decide(doc)
    assert out["desiredReplicas"] == 2 and out["controls"]["failures"] == 2 and not out["controls"]["fallback"]
    doc["history"]["failures"] = 2  # the 3rd: fallback 6
    out = decide(doc)
    assert out["desiredReplicas"] == 6 and out["controls"] == {
        "control": "Fallback", "paused": False, "fallback": True, "failures": 3}
    # without history.failures the count comes from status.metricFailures, as after a controller restart
    del doc["history"]
    doc["hpa"]["status"] = {"metricFailures": 2}
    assert decide(doc)["desiredReplicas"] == 6


def test_pause_holds_or_goes_to_its_count() -> None:
    doc = copy.deepcopy(PAUSE)
    assert decide(doc)["desiredReplicas"] == 3
    doc["hpa"]["metadata"]["annotations"] = {"promscaler.io/paused": "true"}
    out = decide(doc)
    assert out["desiredReplicas"] == 5 and out["controls"]["control"] == "Paused"
    del doc["hpa"]["metadata"]["annotations"]
    out = decide(doc)  # not paused: 120 / 30 = 4, held at 5 by the downscale stabilization (a fresh
    assert out["recommendation"] == 4 and out["desiredReplicas"] == 5  # controller records its current 5)


def test_bad_pause_annotation_names_it() -> None:
    doc = copy.deepcopy(PAUSE)
    doc["hpa"]["metadata"]["annotations"] = {"promscaler.io/paused": "maybe"}
    rc, _, err = run_doc(doc)
    assert rc == 2 and err.startswith(f"{STDIN}hpa.metadata.annotations[promscaler.io/paused]: must be"), err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_schedule_window_follows_the_clock() -> None:
    doc = copy.deepcopy(SCHEDULE)
    out = decide(doc)
    assert out["desiredReplicas"] == 10 and out["controls"]["schedule"] == "office-hours"
    doc["now"] = "2026-03-30T16:00:00Z"  # 18:00 CEST: closed, the metric's 4
    out = decide(doc)
    assert out["desiredReplicas"] == 4 and "schedule" not in out["controls"]
    doc["now"] = "2026-03-28T09:00:00Z"  # a Saturday: closed
    assert decide(doc)["desiredReplicas"] == 4


def test_bad_schedule_names_the_field() -> None:
    doc = copy.deepcopy(SCHEDULE)
    doc["hpa"]["spec"]["schedules"][0]["timeZone"] = "Europe/Atlantis"
    rc, _, err = run_doc(doc)
    assert rc == 2 and err.startswith(f"{STDIN}hpa.spec.schedules[0].timeZone: unknown IANA time zone"), err
    doc = copy.deepcopy(SCHEDULE)
    doc["hpa"]["spec"]["schedules"][0]["startAt"] = "0 8 * * *"
    rc, _, err = run_doc(doc)
    assert rc == 2 and err.startswith(f"{STDIN}hpa.spec.schedules[0].startAt: unknown field"), err


def test_activation_starts_above_its_value() -> None:
    doc = copy.deepcopy(ACTIVATION)
    out = decide(doc)
    assert out["desiredReplicas"] == 0 and out["controls"]["activation"] == "inactive"
    doc["metrics"]["external"][0]["value"] = "8"  # above 5: ceil(8 / 10) = 1
    out = decide(doc)
    assert out["desiredReplicas"] == 1 and out["controls"]["activation"] == "active"


def test_an_hpa_scenario_has_no_controls_key() -> None:
    doc = copy.deepcopy(PAUSE)
    del doc["hpa"]["metadata"]["annotations"]
    assert "controls" not in decide(doc)
