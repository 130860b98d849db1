"""The decision engine is one pure function whose words for people are formatted when read.

- `decide()` leaves its input untouched (the parsed spec included: nothing is cached in it) and
  gives equal decisions for equal inputs, whichever of `explanation`, `details`, `steps` is read first.
- `Decision` is a frozen dataclass whose lazy fields read, compare and copy as fields.
- Normalization keeps the recommendations of the longest window, in order.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscaler.decision import ControllerConfig, History, Recommendation, decide, parse_spec
from autoscaler.decision.normalize import normalize_with_behavior

from .decision_helpers import (
    NOW,
    cpu_util,
    events,
    ext_avg,
    external,
    inp,
    pod,
    pods,
    pods_metric,
    recs,
    samples,
    spec,
)

ROOT = Path(__file__).resolve().parents[2]


def _bench_input():
    module_spec = importlib.util.spec_from_file_location("decision_bench", ROOT / "bench" / "decision_bench.py")
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.build_input()


def _inputs():
    starting = pod("p2", start=NOW - timedelta(seconds=60), ready=False)
    return {
        "bench": _bench_input(),
        "cpu with a starting pod": inp(spec([cpu_util(50)]), 3, [*pods(2), starting], [samples([1500, 1500, 100])]),
        "behavior with history": inp(
            spec([pods_metric("500m"), ext_avg("30")], behavior={"scaleDown": {"policies": [
                {"type": "Pods", "value": 1, "periodSeconds": 60}]}}),
            4, pods(4), [samples([100, 100, 100]), external(30_000)],
            history=History(recs((30, 6), (90, 5)), events((10, 1)), events((20, 1)))),
    }


@pytest.mark.parametrize("name", sorted(_inputs()))
def test_decide_leaves_its_input_as_it_was(name):
    given_input = _inputs()[name]
    before = copy.deepcopy(given_input)
    decide(given_input).explanation  # noqa: B018 (formatting the words must not touch the input either)
    assert given_input == before
    for a, b in zip(given_input.spec.metrics, before.spec.metrics, strict=True):
        assert (a.label, a.target_text) == (b.label, b.target_text)


def test_the_cluster_tolerance_is_read_per_decision_not_remembered_in_the_spec():
    # 100 pods' worth of 105% against 100%: within a 10% tolerance, outside a 1% one. The same parsed
    # spec asked with one, then the other, must answer each time for the tolerance given.
    s = spec([pods_metric("1")])
    loose = inp(s, 10, pods(10), [samples([1050] * 10)])
    tight = dataclasses.replace(loose, config=ControllerConfig(tolerance=0.01))
    assert decide(loose).recommendation == 10
    assert decide(tight).recommendation == 11   # ceil(1.05 x 10)
    assert decide(loose).recommendation == 10


@pytest.mark.parametrize("name", sorted(_inputs()))
def test_reading_order_does_not_matter(name):
    given_input = _inputs()[name]
    first, second = decide(given_input), decide(given_input)
    explanation = first.explanation  # explanation before details and steps
    details, steps = second.details, second.steps  # and the other way round
    assert explanation == second.explanation and details == first.details and steps == first.steps
    assert first == second
    assert explanation[-1] in (f"result: stay at {first.current_replicas} replicas",
                               f"result: scale from {first.current_replicas} to {first.desired_replicas} replicas")


def test_decision_reads_compares_and_copies_its_lazy_fields_as_fields():
    d = decide(_inputs()["cpu with a starting pod"])
    copy_ = dataclasses.replace(d, desired_replicas=d.desired_replicas + 1)
    assert copy_.explanation == d.explanation and copy_.steps == d.steps and copy_ != d
    assert dataclasses.asdict(d)["explanation"] == d.explanation
    assert "explanation=[" in repr(d)
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.explanation = []  # type: ignore[misc]
    plain = type(d)(1, 1, None, [], [], [], ["x"], d.history)  # plain values are kept as given
    assert plain.explanation == ["x"] and plain.details == () and plain.steps == ()


# --- normalization keeps the recommendations of the longest window, in order ------------------

@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from([0, 30, 59, 60, 61, 299, 300, 301, 900]), st.integers(0, 50)), max_size=12),
       st.sampled_from([0, 60, 300]), st.sampled_from([None, 0, 120, 600]), st.integers(1, 50))
def test_kept_recommendations_are_the_window_filter_in_order(recs_, up_window, down_window, desired):
    # Any order (a pasted history need not be sorted): the kept ones are the filter, in order.
    scale_down = {} if down_window is None else {"stabilizationWindowSeconds": down_window}
    hpa = parse_spec({"scaleTargetRef": {"kind": "Deployment", "name": "t"}, "maxReplicas": 100,
                      "metrics": [{"type": "External", "external": {"metric": {"name": "q"},
                                   "target": {"type": "Value", "value": "1"}}}],
                      "behavior": {"scaleUp": {"stabilizationWindowSeconds": up_window}, "scaleDown": scale_down}})
    history = tuple(Recommendation(NOW - timedelta(seconds=s), r) for s, r in recs_)
    norm = normalize_with_behavior(hpa, 10, desired, 1, history, (), (), NOW, 300.0)
    longest = max(up_window, 300 if down_window is None else down_window)
    expected = tuple(r for r in history if r.timestamp >= NOW - timedelta(seconds=longest))
    assert norm.recommendations == (*expected, Recommendation(NOW, desired))
