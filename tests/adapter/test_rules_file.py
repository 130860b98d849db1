"""The rules file: prometheus-adapter's format, errors naming rule index and field, reload on change."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from adapter.naming import compile_rules
from adapter.rules import RuleError, parse_rules
from kubesim.net import free_port

from .conftest import RULES, AdapterProcess, approx, run_adapter

GOOD = {"seriesQuery": "x_total", "resources": {"template": "<<.Resource>>"}, "metricsQuery": "sum(<<.Series>>)"}


def rules_error(doc: dict) -> str:
    with pytest.raises(RuleError) as exc:
        compile_rules(parse_rules(yaml.safe_dump(doc)))
    return str(exc.value)


@pytest.mark.parametrize("doc,message", [
    ({"rules": [GOOD, GOOD, {**GOOD, "metricsQuery": None}]}, "rules[2].metricsQuery: required field is missing"),
    ({"rules": [GOOD, {**GOOD, "seriesQuery": ""}]}, "rules[1].seriesQuery: must not be empty"),
    ({"rules": [{**GOOD, "metricsQuery": "sum(<<.Series>>{<<.Bogus>>})"}]},
     "rules[0].metricsQuery: unknown field '.Bogus'"),
    ({"rules": [{**GOOD, "metricsQuery": "sum(<<if .Series>>x)"}]}, "rules[0].metricsQuery: unclosed"),
    ({"rules": [{**GOOD, "seriesFilters": [{"is": "a", "isNot": "b"}]}]},
     "rules[0].seriesFilters[0]: needs exactly one"),
    ({"rules": [{**GOOD, "seriesFilters": [{"isNot": "("}]}]},
     "rules[0].seriesFilters[0].isNot: invalid regular expression"),
    ({"rules": [{**GOOD, "name": {"matches": "^(a)(b)$"}}]}, "rules[0].name.as: required"),
    ({"rules": [{**GOOD, "name": {"matches": "(["}}]}, "rules[0].name.matches: invalid regular expression"),
    ({"rules": [{**GOOD, "resources": {"overrides": {"pod": {"resource": "widgets"}}}}]},
     "rules[0].resources.overrides.pod: unknown resource 'widgets'"),
    ({"rules": [{**GOOD, "resources": {"template": "<<.Group>>"}}]},
     "rules[0].resources.template: must include <<.Resource>>"),
    ({"rules": [{**GOOD, "resources": {}}]}, "rules[0].resources: needs overrides or a template"),
    ({"externalRules": [GOOD, {"seriesQuery": "q", "metricsQuery": 5}]},
     "externalRules[1].metricsQuery: must be a string"),
    ({"externalRules": [{**GOOD, "resources": {"namespaced": "yes"}}]},
     "externalRules[0].resources.namespaced: must be true or false"),
    ({"rules": {"seriesQuery": "x"}}, "rules: must be a list"),
])
def test_invalid_rule_names_index_and_field(doc, message):
    assert message in rules_error(doc)


def test_sample_rules_file_is_valid():
    root = Path(__file__).resolve().parents[2]
    rules = compile_rules(parse_rules((root / "adapter" / "sample-rules.yaml").read_text()))
    assert len(rules.rules) == 1 and len(rules.external_rules) == 1


def test_invalid_rules_file_exits_with_one_line(tmp_path):
    bad = tmp_path / "rules.yaml"
    bad.write_text(yaml.safe_dump({"rules": [GOOD, {**GOOD, "metricsQuery": "sum(<<.Nope>>)"}]}))
    out = run_adapter("--insecure", "--port", str(free_port()), "--prometheus-url", "http://127.0.0.1:1",
                      "--config", str(bad))
    assert out.returncode == 1 and out.stdout == ""
    [line] = out.stderr.strip().splitlines()
    assert line.startswith("promscaler-adapter: invalid rules file") and "rules[1].metricsQuery" in line
    broken = tmp_path / "broken.yaml"
    broken.write_text("rules:\n  - seriesQuery: [unclosed\n")
    out = run_adapter("--insecure", "--port", str(free_port()), "--config", str(broken))
    assert out.returncode == 1 and "not valid YAML at line" in out.stderr and "Traceback" not in out.stderr


def test_unknown_flag_is_an_error():
    out = run_adapter("--insecure", "--port", "1", "--config", str(RULES), "--no-such-flag")
    assert out.returncode == 2 and "unrecognized arguments: --no-such-flag" in out.stderr


def test_rules_file_reloaded_on_change_and_last_good_kept(prometheus, promql, tmp_path):
    rules = tmp_path / "rules.yaml"
    doc = yaml.safe_load(RULES.read_text())
    first = {"rules": [doc["rules"][0]]}
    rules.write_text(yaml.safe_dump(first))
    adapter = AdapterProcess("--prometheus-url", prometheus.url, "--config", str(rules),
                             "--config-check-interval", "200ms").wait_ready()
    node_path = "/apis/custom.metrics.k8s.io/v1beta2/nodes/node-1/node_load"
    try:
        assert adapter.get(node_path).status_code == 404
        # a ConfigMap update: the node rule appears without a restart
        rules.write_text(yaml.safe_dump({"rules": [doc["rules"][0], doc["rules"][4]]}))
        deadline = time.monotonic() + 15
        while adapter.get(node_path).status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        resp = adapter.get(node_path)
        assert resp.status_code == 200
        assert approx(resp.json()["items"][0]["value"], promql.by("node_load", "node")["node-1"])
        # an invalid update is refused: the previous rules keep serving
        rules.write_text(yaml.safe_dump({"rules": [{**doc["rules"][4], "metricsQuery": "<<.Bad>>"}]}))
        deadline = time.monotonic() + 15
        while "keeping the previous rules" not in adapter.stderr() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "rules[0].metricsQuery" in adapter.stderr()
        assert adapter.get(node_path).status_code == 200
        path = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/web-1/http_requests"
        assert adapter.get(path).status_code == 200
    finally:
        adapter.stop()


def test_sigterm_is_a_clean_exit(prometheus):
    adapter = AdapterProcess("--prometheus-url", prometheus.url, "--config", str(RULES)).wait_ready()
    try:
        adapter.proc.terminate()
        assert adapter.proc.wait(timeout=15) == 0
        assert "Traceback" not in adapter.stderr()
    finally:
        adapter.stop()
