"""Property: any mutation of a valid scenario ends in exit status 0, 1 or 2 with no traceback.

Mutations replace, delete or add a field anywhere in the document with values chosen to break
readers (wrong types, huge and non-finite numbers, odd times and quantities, nesting, unknown
fields); `simulate` runs in-process on the YAML text. SIMULATE_FUZZ_EXAMPLES raises the count
(5,000 was run once by hand; the suite keeps it modest).
"""

from __future__ import annotations

import copy
import os
from datetime import UTC, date, datetime
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .scenario_docs import valid_scenarios
from .simulate_run import run_text

BASES = valid_scenarios()
EXAMPLES = int(os.environ.get("SIMULATE_FUZZ_EXAMPLES", "300"))

HOSTILE_VALUES = st.one_of(
    st.sampled_from([
        None, "", "x", 0, -1, 1, 3, 2**31, 2**63, 10**400, 1.5, -0.0, 1e300, float("inf"), float("-inf"), float("nan"),
        True, False, "1e400", "-1e400", "500m", "1.5.0", "1Ki", "0", "-5", "NaN", "Infinity", "0x10", "30s", "-30s",
        "1e20s", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "2026-13-45T99:99:99Z", "app=web", "app in (a",
        "\x00", "é" * 3, "Pod", "Running", "Failed", "True", "False", "Utilization", "AverageValue", "Value",
        datetime(1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, tzinfo=UTC), date(2026, 1, 1),
        [], {}, [1, 2], {"a": 1}, {"matchLabels": 1.5}, [[[[[[]]]]]], {"x": {"y": {"z": [None]}}},
    ]),
    st.integers(), st.floats(allow_nan=True), st.text(max_size=8),
)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.extend(_paths(v, (*prefix, i)))
    return out


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, list[str]]:
    doc = copy.deepcopy(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths[1:]))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        op = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add"]))
        if op == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif op == "add" and isinstance(parent[path[-1]], dict):
            parent[path[-1]][draw(st.sampled_from(["behaviour", "extra", "stabilizationWindowSecond", "x"]))] = 1
        else:
            parent[path[-1]] = copy.deepcopy(draw(HOSTILE_VALUES))  # the constants stay as they are
    args = draw(st.sampled_from([[], ["-o", "json"], ["--check"], ["--check", "-o", "json"]]))
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), args


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated())
def test_mutated_scenarios_exit_0_1_or_2_without_a_traceback(case):
    text, args = case
    rc, out, err = run_text(text, *args)
    assert rc in (0, 1, 2)
    assert "Traceback" not in err and "Traceback" not in out
    assert all(line.startswith("autoscaler simulate: ") for line in err.splitlines()), err
    if rc == 2:
        assert err.count("\n") == 1, err
