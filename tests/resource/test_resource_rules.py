"""`resourceRules` read as prometheus-adapter writes them; a bad one stops start-up with one line
naming the field; offline (no cluster to list pods and nodes from) metrics.k8s.io is not served."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from adapter.naming import BUILTIN_TABLE
from adapter.resourcemetrics import compile_resource_rules, node_query, pod_query
from adapter.rules import RuleError
from kubesim.processes import AdapterProcess
from kubesim.resourceseries import DEFAULT_RESOURCE_RULES

from ..adapter.conftest import run_adapter


def test_default_rules_compile_with_each_rules_own_labels() -> None:
    rules = compile_resource_rules(DEFAULT_RESOURCE_RULES, BUILTIN_TABLE)
    assert rules is not None and rules.window_seconds == 180
    assert (rules.cpu.node_label, rules.memory.node_label) == ("node", "instance")
    assert pod_query(rules.cpu, None, []) == (
        'sum by (namespace,pod,container) (rate(container_cpu_usage_seconds_total{pod!="",container!="",pod!=""}[3m]))')
    assert pod_query(rules.memory, "web", ["a.b", "c"]) == (
        'sum by (namespace,pod,container) (container_memory_working_set_bytes{namespace="web",pod=~"a\\\\.b|c",'
        'container!="",pod!=""})')
    assert 'instance="n1"' in node_query(rules.memory, ["n1"]) and "by (instance)" in node_query(rules.memory, ["n1"])
    assert compile_resource_rules(None) is None


@pytest.mark.parametrize("path, value, message", [
    (("cpu", "containerLabel"), None, "resourceRules.cpu.containerLabel: required"),
    (("memory", "nodeQuery"), None, "resourceRules.memory.nodeQuery: required"),
    (("memory", "containerQuery"), "sum(<<.Nope>>)", "resourceRules.memory.containerQuery:"),
    (("cpu", "resources"), {"overrides": {"pod": {"resource": "pod"}}}, "resourceRules.cpu.resources: no label maps"),
    (("cpu", "resources"), {"overrides": {"x": {"resource": "widget"}}}, "resourceRules.cpu.resources.overrides.x"),
    (("window",), "soon", "resourceRules.window:"),
    (("memory",), None, "resourceRules.memory: required"),
])
def test_bad_rules_name_the_field(path: tuple[str, ...], value: object, message: str) -> None:
    raw = copy.deepcopy(DEFAULT_RESOURCE_RULES)
    target = raw
    for key in path[:-1]:
        target = target[key]
    if value is None:
        target.pop(path[-1])
    else:
        target[path[-1]] = value
    with pytest.raises(RuleError) as exc:
        compile_resource_rules(raw, BUILTIN_TABLE)
    assert str(exc.value).startswith(message), exc.value


def test_template_resources_work_too() -> None:
    raw = copy.deepcopy(DEFAULT_RESOURCE_RULES)
    raw["cpu"]["resources"] = {"template": "<<.Resource>>"}
    rules = compile_resource_rules(raw, BUILTIN_TABLE)
    assert rules is not None and (rules.cpu.pod_label, rules.cpu.namespace_label, rules.cpu.node_label) == (
        "pod", "namespace", "node")


def test_bad_resource_rules_stop_start_up(tmp_path: Path) -> None:
    raw = copy.deepcopy(DEFAULT_RESOURCE_RULES)
    del raw["cpu"]["containerLabel"]
    config = tmp_path / "rules.yaml"
    config.write_text(yaml.safe_dump({"resourceRules": raw}))
    out = run_adapter("--prometheus-url", "http://127.0.0.1:1", "--config", str(config), "--insecure", "--port", "0")
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1].endswith("resourceRules.cpu.containerLabel: required: the label that "
                                                         "names containers (usually `container`)")
    assert "Traceback" not in out.stderr


def test_offline_the_group_is_not_served(tmp_path: Path) -> None:

    config = tmp_path / "rules.yaml"
    config.write_text(yaml.safe_dump({"resourceRules": DEFAULT_RESOURCE_RULES}))
    with AdapterProcess("--prometheus-url", "http://127.0.0.1:1", "--config", str(config)).wait_listening(60) as a:
        assert "metrics.k8s.io" not in [g["name"] for g in a.get("/apis").json()["groups"]]
        assert a.get("/apis/metrics.k8s.io/v1beta1/pods").status_code == 404
        assert "resourceRules are not served" in a.stderr()


def test_inline_spellings_are_format_milli() -> None:
    """The routes spell 5,000 pods' quantities with inline fast paths: the same as format_milli."""
    import random

    from adapter.resourceroutes import _cpu, _memory
    from promscaler.quantity import format_milli

    rng = random.Random(13)
    values = [0, 5, 999, 1000, 1500, 2000, 1023000, 1024000, 1025000, 10**9, 2 * 1024**3 * 1000, -1500]
    values += [rng.randrange(10**13) for _ in range(2000)] + [rng.randrange(10**7) * 1024000 for _ in range(200)]
    for m in values:
        assert (_cpu(m), _memory(m)) == (format_milli(m), format_milli(m, binary=True)), m
