"""Hostile values never crash `simulate`: each is exit status 2 with one line naming the field."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from .scenario_docs import valid_scenarios
from .simulate_run import run_doc, run_text

CPU, RPS, QUEUE, OBJ = valid_scenarios()


def _set(path: list[Any], value: Any) -> Callable[[dict], None]:
    def mutate(doc: dict) -> None:
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return mutate


HOSTILE = [
    (OBJ, _set(["hpa", "spec", "metrics", 0, "object", "describedObject"], "x"),
     "hpa.spec.metrics[0].object.describedObject: must be an object"),
    (OBJ, _set(["metrics", "custom", 0, "describedObject"], "x"),
     "metrics.custom[0].describedObject: must be an object"),
    (CPU, _set(["pods", 0, "metadata", "labels"], ["app", "web"]), "pods[0].metadata.labels: must be an object"),
    (CPU, _set(["pods", 0, "metadata", "labels"], {"app": 5}), "pods[0].metadata.labels: must map strings to strings"),
    (QUEUE, _set(["hpa", "spec", "metrics", 0, "external", "metric", "selector", "matchLabels"], 1.5),
     "hpa.spec.metrics[0].external.metric.selector.matchLabels: must be an object"),
    (QUEUE, _set(["hpa", "spec", "metrics", 0, "external", "metric", "selector", "matchExpressions"], 7),
     "hpa.spec.metrics[0].external.metric.selector.matchExpressions: must be a list"),
    (QUEUE, _set(["metrics", "external", 0, "metricLabels"], {"queue": ["worker_tasks"]}),
     "metrics.external[0].metricLabels: must map strings to strings"),
    (CPU, _set(["metrics", "resource", 0, "containers", 0, "usage", "cpu"], "1e400"),
     "metrics.resource[0].containers[0].usage.cpu: out of range"),
    (QUEUE, _set(["metrics", "external", 0, "value"], "1e400"), "metrics.external[0].value: out of range"),
    (RPS, _set(["hpa", "spec", "metrics", 0, "pods", "target", "averageValue"], "1e400"),
     "hpa.spec.metrics[0].pods.target.averageValue: out of range"),
    (CPU, _set(["scaleTarget", "spec", "replicas"], float("inf")), "scaleTarget.spec.replicas: must be an integer"),
    (CPU, _set(["scaleTarget", "spec", "replicas"], 10**400), "scaleTarget.spec.replicas: must be less than or equal"),
    (CPU, _set(["hpa", "spec", "maxReplicas"], 1e300),
     "hpa.spec.maxReplicas: must be less than or equal to 2147483647"),
    (CPU, _set(["config"], {"cpuInitializationPeriod": float("inf")}), "config.cpuInitializationPeriod: out of range"),
    (CPU, _set(["now"], "0001-01-01T00:00:00Z"), "now: out of range"),
    (CPU, _set(["metrics", "resource", 0, "timestamp"], "0001-01-01T00:00:00Z"),
     "metrics.resource[0].timestamp: out of range"),
    (CPU, _set(["pods", 1, "status", "startTime"], "0001-01-01T00:00:00Z"), "pods[1].status.startTime: out of range"),
    (CPU, _set(["history"], {"recommendations": [{"timestamp": "0001-01-01T00:00:00Z", "replicas": 3}]}),
     "history.recommendations[0].timestamp: out of range"),
    (CPU, _set(["metrics", "resource", 0, "window"], "100000000000000000s"),
     "metrics.resource[0].window: out of range"),
]


def _one_line_exit_2(rc: int, out: str, err: str) -> None:
    assert rc == 2, (out, err)
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err, err


@pytest.mark.parametrize(("base", "mutate", "message"), HOSTILE, ids=[h[2].split(":")[0] for h in HOSTILE])
def test_hostile_values_exit_2_naming_the_field(base, mutate, message):
    doc = copy.deepcopy(base)
    mutate(doc)
    rc, out, err = run_doc(doc, "-o", "json")
    _one_line_exit_2(rc, out, err)
    assert message in err, err


def _nested(levels: int) -> str:
    deep = copy.deepcopy(CPU)
    deep["expect"]["currentMetrics"] = "@@"
    return yaml.safe_dump(deep).replace("'@@'", "[" * levels + "]" * levels)


def test_a_document_nested_100_levels_deep_names_the_field():
    """Deeper than any scenario needs, shallower than any YAML parser's own limit: simulate's check
    names the field."""
    rc, out, err = run_text(_nested(100))
    _one_line_exit_2(rc, out, err)
    assert "expect.currentMetrics[0][0]" in err and "nested deeper than 64 levels" in err, err


def test_a_document_nested_2000_levels_deep_names_where():
    """Whichever layer refuses it (libyaml >= 0.2.6 stops at 1000 levels itself, older parsers leave
    it to simulate's own check), a user gets exit 2 and one line naming the cause and where."""
    text = _nested(2000)
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if "currentMetrics" in ln)
    rc, out, err = run_text(text)
    _one_line_exit_2(rc, out, err)
    by_simulate = "expect.currentMetrics[0][0]" in err and "nested deeper than 64 levels" in err
    by_parser = f"(line {line}, column " in err and "nesting depth" in err
    assert by_simulate or by_parser, err
    # Far deeper (libyaml would overflow its C stack): refused before parsing.
    for text in ("[" * 300_000 + "]" * 300_000, "- " * 300_000 + "x"):
        rc, out, err = run_text(text)
        _one_line_exit_2(rc, out, err)
        assert "nested deeper than 10000 levels" in err, err


def test_a_date_as_a_field_name_and_a_timestamp_where_a_number_belongs():
    rc, _, err = run_text("{2026-01-01: 1}")
    assert rc == 2 and "2026-01-01: field names must be strings" in err
    doc = copy.deepcopy(CPU)
    doc["expect"]["desiredReplicas"] = "@@"
    rc, out, err = run_text(yaml.safe_dump(doc).replace("'@@'", "2026-01-01T00:00:00Z"), "--check")
    assert rc == 1 and "desiredReplicas: expected \"2026-01-01 00:00:00" in out, out


@pytest.mark.parametrize("doc", valid_scenarios(), ids=["cpu", "pods", "external", "object"])
def test_the_unmutated_scenarios_pass_their_checks(doc):
    rc, out, err = run_doc(doc, "--check")
    assert rc == 0 and out.endswith(": ok\n"), (out, err)
