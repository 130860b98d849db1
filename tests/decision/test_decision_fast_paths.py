"""The decision engine's fast paths give exactly what the general code gives.

- The words (`Decision.explanation`, `details`, `steps`) are formatted on first read: they equal
  the text the eager engine printed for the example scenarios (examples/scenarios/) and the benchmark's scenario
  (data/eager_words.json was written by the engine before it became lazy), in any reading order.
- The calculator's fused loops (distinct pod names, requests summed in the pass) agree with the
  general path (`unique=False`) on generated pods, samples and targets.
- `Decision` stays a frozen dataclass whose lazy fields read, compare and copy as fields.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscaler.decision import ControllerConfig, PodInfo, PodSample, decide
from autoscaler.decision.replicas import (
    CalcError, Tolerances, names_unique, plain_metric_replicas, render_notes, resource_utilization_replicas,
)
from autoscaler.simulate.scenario import build_scenario, load_scenarios
from .decision_helpers import NOW

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "scenarios").glob("*.yaml"))
EAGER = json.loads((Path(__file__).parent / "data" / "eager_words.json").read_text())
SETTINGS = settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def _bench_input():
    spec = importlib.util.spec_from_file_location("decision_bench", ROOT / "bench" / "decision_bench.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.build_input()


def _inputs():
    out = {}
    for path in EXAMPLES:
        for label, doc in load_scenarios(str(path)):
            out[path.name] = build_scenario(label, doc, default_now=datetime(2026, 1, 1, tzinfo=UTC)).input
    out["bench"] = _bench_input()
    return out


def _words(d) -> dict:
    return {"explanation": list(d.explanation), "steps": list(d.steps),
            "details": [[x.type, x.name, x.target, x.current, x.ratio, x.replicas, x.error, list(x.notes)]
                        for x in d.details]}


def test_the_eager_words_cover_every_example_scenario():
    assert EXAMPLES and set(EAGER) == {p.name for p in EXAMPLES} | {"bench"}


@pytest.mark.parametrize("name", sorted(EAGER))
def test_lazy_words_equal_the_eager_engines_text(name):
    d = decide(_inputs()[name])
    assert _words(d) == EAGER[name]


@pytest.mark.parametrize("name", sorted(EAGER))
def test_reading_order_does_not_matter(name):
    inp = _inputs()[name]
    first, second = decide(inp), decide(inp)
    explanation = first.explanation  # explanation before details and steps
    details, steps = second.details, second.steps  # and the other way round
    assert explanation == second.explanation and details == first.details and steps == first.steps
    assert first == second


def test_decision_is_still_a_frozen_dataclass_with_its_fields():
    d = decide(_inputs()["bench"])
    names = [f.name for f in dataclasses.fields(d)]
    assert names == ["desired_replicas", "current_replicas", "recommendation", "current_metrics", "proposals",
                     "conditions", "explanation", "history", "details", "steps"]
    copy = dataclasses.replace(d, desired_replicas=d.desired_replicas + 1)
    assert copy.explanation == d.explanation and copy.steps == d.steps and copy != d
    assert dataclasses.asdict(d)["explanation"] == EAGER["bench"]["explanation"]
    assert "explanation=[" in repr(d)
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.explanation = []  # type: ignore[misc]
    plain = type(d)(1, 1, None, [], [], [], ["x"], d.history)  # plain values are kept as given
    assert plain.explanation == ["x"] and plain.details == () and plain.steps == ()


# --- the calculator's fused loops against its general path ------------------------------------

OFFSETS = [0, 10, 29, 30, 31, 44, 45, 46, 299, 300, 301, 3600]


@st.composite
def pod_st(draw, i: int) -> PodInfo:
    start = draw(st.one_of(st.none(), st.sampled_from(OFFSETS)))
    transition = draw(st.one_of(st.none(), st.sampled_from(OFFSETS)))
    containers = draw(st.sampled_from([["app"]] * 4 + [["app", "side"]] * 2 + [[]]))
    requests = {c: ({} if draw(st.integers(0, 30)) == 0 else
                    {"cpu": draw(st.sampled_from([0, 100, 500])), "memory": draw(st.sampled_from([100, 2000]))})
                for c in containers}
    return PodInfo(
        name=f"p{i}", phase=draw(st.sampled_from(["Running"] * 6 + ["Pending", "Failed", "Succeeded"])),
        deleted=draw(st.integers(0, 15)) == 0,
        ready_condition=draw(st.sampled_from(["True", "True", "True", "False", None, "Unknown"])),
        start_time=None if start is None else NOW - timedelta(seconds=start),
        ready_transition=None if transition is None else NOW - timedelta(seconds=transition),
        requests=requests,
    )


@st.composite
def world_st(draw):
    n = draw(st.integers(1, 12))
    pods = [draw(pod_st(i)) for i in range(n)]
    samples = {}
    for p in pods:
        if draw(st.integers(0, 5)):
            samples[p.name] = PodSample(draw(st.sampled_from([0, 50, 250, 400, 900, 3000])),
                                        NOW - timedelta(seconds=draw(st.sampled_from([0, 5, 15, 40]))),
                                        draw(st.sampled_from([0.0, 15.0, 30.0, 60.0])))
    if draw(st.integers(0, 9)) == 0:
        samples["ghost"] = PodSample(500, NOW, 30.0)
    return tuple(pods), samples


def _outcome(fn, *args, **kw):
    try:
        calc = fn(*args, **kw)
    except CalcError as exc:
        return "error", str(exc)
    return calc.replicas, calc.usage, calc.ratio, calc.utilization, render_notes(calc.notes)


@SETTINGS
@given(world_st(), st.sampled_from(["cpu", "memory"]), st.sampled_from([20, 60, 100, 150]),
       st.integers(1, 20), st.sampled_from([0.0, 0.1]))
def test_fused_utilization_pass_equals_the_general_path(world, resource, target, current, tolerance):
    pods, samples = world
    args = (current, target, resource, Tolerances(tolerance, tolerance), pods, samples, ControllerConfig(), NOW)
    assert names_unique(pods)
    assert _outcome(resource_utilization_replicas, *args, unique=True) == \
        _outcome(resource_utilization_replicas, *args, unique=False)


@SETTINGS
@given(world_st(), st.sampled_from(["", "memory"]), st.sampled_from([1, 200, 500, 2000]),
       st.integers(1, 20), st.sampled_from([0.0, 0.1]))
def test_counting_pass_for_plain_metrics_equals_the_general_path(world, resource, target, current, tolerance):
    pods, samples = world
    args = (current, target, resource, Tolerances(tolerance, tolerance), pods, samples, ControllerConfig(), NOW)
    assert _outcome(plain_metric_replicas, *args, unique=True) == _outcome(plain_metric_replicas, *args, unique=False)


def test_repeated_pod_names_take_the_general_path():
    # Two pods named p0: the general path keys samples by name, so p0 counts once.
    a = PodInfo("p0", requests={"app": {"cpu": 100}}, start_time=NOW - timedelta(hours=1))
    b = PodInfo("p0", requests={"app": {"cpu": 100}}, start_time=NOW - timedelta(hours=1))
    samples = {"p0": PodSample(200, NOW, 30.0)}
    assert not names_unique((a, b))
    calc = resource_utilization_replicas(1, 100, "cpu", Tolerances(), (a, b), samples, ControllerConfig(), NOW)
    assert (calc.utilization, calc.replicas) == (200, 2)
    calc = plain_metric_replicas(1, 100, "", Tolerances(), (a, b), samples, ControllerConfig(), NOW)
    assert (calc.usage, calc.replicas) == (200, 2)


# --- normalization keeps the recommendations of the longest window, in order ------------------

@SETTINGS
@given(st.lists(st.tuples(st.sampled_from([0, 30, 59, 60, 61, 299, 300, 301, 900]), st.integers(0, 50)), max_size=12),
       st.sampled_from([0, 60, 300]), st.sampled_from([None, 0, 120, 600]), st.integers(1, 50))
def test_kept_recommendations_are_the_window_filter_in_order(recs, up_window, down_window, desired):
    # Any order (a pasted history need not be sorted): the leading-run slice must equal the filter.
    from autoscaler.decision import Recommendation, parse_spec
    from autoscaler.decision.normalize import normalize_with_behavior

    scale_down = {} if down_window is None else {"stabilizationWindowSeconds": down_window}
    spec = parse_spec({"scaleTargetRef": {"kind": "Deployment", "name": "t"}, "maxReplicas": 100,
                       "metrics": [{"type": "External", "external": {"metric": {"name": "q"},
                                    "target": {"type": "Value", "value": "1"}}}],
                       "behavior": {"scaleUp": {"stabilizationWindowSeconds": up_window}, "scaleDown": scale_down}})
    history = tuple(Recommendation(NOW - timedelta(seconds=s), r) for s, r in recs)
    norm = normalize_with_behavior(spec, 10, desired, 1, history, (), (), NOW, 300.0)
    longest = max(up_window, 300 if down_window is None else down_window)
    expected = tuple(r for r in history if r.timestamp >= NOW - timedelta(seconds=longest))
    assert norm.recommendations == expected + (Recommendation(NOW, desired),)
