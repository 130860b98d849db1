"""`autoscaler simulate` as users run it: files, stdin, multi-document, -o json, --check, exit codes."""

from __future__ import annotations

import copy
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from autoscaler.simulate import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "scenarios"
EXAMPLE_FILES = sorted(str(p) for p in EXAMPLES.glob("*.yaml"))
PODS_EXAMPLE = str(EXAMPLES / "pods-http-requests.yaml")
OUTPUT_KEYS = {"desiredReplicas", "currentReplicas", "scale", "currentMetrics", "proposals", "recommendation",
               "conditions", "explanation"}


def run_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "autoscaler", "simulate", *args], input=stdin, text=True,
                          capture_output=True, cwd=REPO, env=env, timeout=60)


def run_main(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdin
    sys.stdin = io.StringIO(stdin or "")
    try:
        rc = main(list(args), stdout=out, stderr=err)
    finally:
        sys.stdin = old
    return rc, out.getvalue(), err.getvalue()


def example(name: str = "pods-http-requests.yaml") -> dict:
    return yaml.safe_load((EXAMPLES / name).read_text())


def write(tmp_path: Path, *docs: dict, name: str = "s.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(list(docs), sort_keys=False))
    return str(path)


def test_example_scenarios_pass_check() -> None:
    assert len(EXAMPLE_FILES) == 4
    proc = run_cli("--check", *EXAMPLE_FILES)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 4 and all(line.endswith(": ok") for line in lines), proc.stdout
    assert proc.stderr == ""


def test_json_output_shape() -> None:
    proc = run_cli(PODS_EXAMPLE, "-o", "json")
    assert proc.returncode == 0 and proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert len(lines) == 1
    out = json.loads(lines[0])
    assert set(out) >= OUTPUT_KEYS
    assert out["desiredReplicas"] == 6 and out["currentReplicas"] == 3 and out["scale"] is True
    assert out["recommendation"] == 9
    assert out["currentMetrics"] == [{"type": "Pods", "pods": {"metric": {"name": "http_requests"},
                                                               "current": {"averageValue": "1500m"}}}]
    assert out["proposals"] == [{"type": "Pods", "name": "http_requests", "replicas": 9}]
    # a rescale under 1.37 sets ScaledToZero (False) whatever the metrics (HPAScaleToZero on)
    assert [c["type"] for c in out["conditions"]] == ["AbleToScale", "ScalingActive", "ScalingLimited",
                                                     "ScaledToZero"]
    for c in out["conditions"]:
        assert set(c) == {"type", "status", "reason", "message"} and c["status"] in ("True", "False", "Unknown")
    assert {c["type"]: c["reason"] for c in out["conditions"]}["ScalingLimited"] == "ScaleUpLimit"
    assert out["explanation"] and all(isinstance(line, str) for line in out["explanation"])


def test_multi_document_json_lines_in_order(tmp_path: Path) -> None:
    path = write(tmp_path, example("pods-http-requests.yaml"), example("scale-down-policies.yaml"))
    rc, out, err = run_main(path, "-o", "json")
    assert rc == 0 and err == ""
    results = [json.loads(line) for line in out.splitlines()]
    assert [r["desiredReplicas"] for r in results] == [6, 72]
    rc, out, _ = run_main("--check", path)
    assert rc == 0
    assert out.splitlines()[0].startswith(f"{path}#1") and out.splitlines()[1].startswith(f"{path}#2")


def test_stdin_yaml_and_json() -> None:
    text = (EXAMPLES / "external-queue-average-value.yaml").read_text()
    proc = run_cli("-", "-o", "json", stdin=text)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["desiredReplicas"] == 4
    # JSON is YAML: the same scenario as one JSON document
    rc, out, _ = run_main("-", "-o", "json", stdin=json.dumps(example("external-queue-average-value.yaml")))
    assert rc == 0 and json.loads(out)["currentMetrics"][0]["external"]["current"]["averageValue"] == "60"


def test_check_reports_differences_and_exits_1(tmp_path: Path) -> None:
    doc = example()
    doc["expect"] = {"desiredReplicas": 9, "conditions": {"ScalingLimited": "DesiredWithinRange"},
                     "currentMetrics": [{"type": "Pods", "pods": {"current": {"averageValue": "1.5"}}}]}
    good = example("scale-down-policies.yaml")
    rc, out, _ = run_main("--check", write(tmp_path, doc, name="bad.yaml"), write(tmp_path, good, name="good.yaml"))
    assert rc == 1
    bad_line, good_line = out.splitlines()
    assert "FAILED" in bad_line
    assert "desiredReplicas: expected 9, got 6" in bad_line
    assert "conditions.ScalingLimited: expected DesiredWithinRange, got ScaleUpLimit" in bad_line
    assert "averageValue" not in bad_line  # 1.5 and 1500m are the same quantity
    assert good_line.endswith(": ok")


def test_check_without_expect_fails_saying_so(tmp_path: Path) -> None:
    doc = example()
    del doc["expect"]
    rc, out, _ = run_main("--check", write(tmp_path, doc))
    assert rc == 1 and "FAILED: no expect: block, nothing to check" in out


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["hpa"]["spec"]["metrics"].append(
            {"type": "Pods",
             "pods": {"metric": {"name": "x"}, "target": {"type": "AverageValue", "averageValue": "lots"}}}),
         "hpa.spec.metrics[1].pods.target.averageValue: not a quantity"),
        (lambda d: d["hpa"]["spec"]["metrics"][0]["pods"]["target"].update(type="Utilization"),
         "hpa.spec.metrics[0].pods.target.type: must be AverageValue"),
        (lambda d: d["hpa"]["spec"].update(minReplicas=5, maxReplicas=2),
         "hpa.spec.maxReplicas: must be greater than or equal to `minReplicas`"),
        (lambda d: d["hpa"]["spec"].update(minReplicas=0), "hpa.spec.minReplicas: must be greater than or equal to 1"),
        (lambda d: d["hpa"]["spec"].update(behavior={"scaleDown": {"policies": [{"type": "Pods", "value": 1,
                                                                                 "periodSeconds": 4000}]}}),
         "hpa.spec.behavior.scaleDown.policies[0].periodSeconds: must be less than or equal to 1800"),
        (lambda d: d["hpa"]["spec"].update(behavior={"scaleUp": {"selectPolicy": "Fastest"}}),
         "hpa.spec.behavior.scaleUp.selectPolicy: must be Max, Min or Disabled"),
        (lambda d: d["scaleTarget"]["spec"].pop("replicas"), "scaleTarget.spec.replicas: required"),
        (lambda d: d["scaleTarget"]["status"].update(selector="app in (a"), "scaleTarget.status.selector:"),
        (lambda d: d.update(now="yesterday"), "now: not an RFC 3339 time"),
        (lambda d: d.update(config={"cpuInitializationPeriod": "5 minutes"}),
         "config.cpuInitializationPeriod: not a duration"),
        (lambda d: d.update(colour="blue"), "colour: unknown field"),
        (lambda d: d["pods"][1].update(spec={"containers": [{"name": "app",
                                                             "resources": {"requests": {"cpu": "x1"}}}]}),
         "pods[1].spec.containers[0].resources.requests.cpu: not a quantity"),
        (lambda d: d["metrics"]["custom"][2].update(value="1.5.0"), "metrics.custom[2].value: not a quantity"),
        (lambda d: d.update(history={"recommendations": [{"timestamp": "2026-01-01T00:00:00Z", "replicas": -1}]}),
         "history.recommendations[0].replicas: must be greater than or equal to 0"),
        (lambda d: d["metrics"].update(failures=[{"type": "Queue", "name": "x"}]),
         "metrics.failures[0].type: must be one of"),
        (lambda d: d.update(expect={"replicas": 3}), "expect.replicas: unknown field"),
        (lambda d: d["hpa"].update(apiVersion="autoscaling/v1"), "hpa.apiVersion: autoscaling/v1 is not supported"),
    ],
)
def test_invalid_scenarios_name_the_field(tmp_path: Path, mutate, message: str) -> None:
    doc = copy.deepcopy(example())
    mutate(doc)
    rc, out, err = run_main(write(tmp_path, doc), "-o", "json")
    assert rc == 2
    assert out == ""
    assert message in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_invalid_external_selector_and_yaml(tmp_path: Path) -> None:
    doc = example("external-queue-average-value.yaml")
    doc["hpa"]["spec"]["metrics"][0]["external"]["metric"]["selector"] = {
        "matchExpressions": [{"key": "queue", "operator": "Near", "values": ["a"]}]}
    rc, _, err = run_main(write(tmp_path, doc), "-o", "json")
    assert rc == 2 and "hpa.spec.metrics[0].external.metric.selector: matchExpressions[0].operator" in err
    bad = tmp_path / "broken.yaml"
    bad.write_text("hpa: {spec: [unclosed\n")
    rc, _, err = run_main(str(bad))
    assert rc == 2 and "not valid YAML" in err and len(err.strip().splitlines()) == 1


def test_invalid_file_gives_no_traceback_via_subprocess(tmp_path: Path) -> None:
    doc = example()
    doc["hpa"]["spec"]["metrics"][0]["pods"]["target"]["averageValue"] = "half"
    proc = run_cli(write(tmp_path, doc), "-o", "json")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().count("\n") == 0 and "Traceback" not in proc.stderr
    assert "hpa.spec.metrics[0].pods.target.averageValue: not a quantity" in proc.stderr
    missing = run_cli(str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr and "Traceback" not in missing.stderr


def test_human_output_is_readable_and_plain_off_terminal() -> None:
    rc, out, _ = run_main(str(EXAMPLES / "cpu-unready-pod.yaml"))
    assert rc == 0
    assert "\x1b[" not in out  # no colour codes when not on a terminal
    for needle in ("metric", "current", "target", "ratio", "proposal", "Resource cpu", "150%", "50% of request",
                   "not yet ready (api-3)", "counted at 0%", "=> scale 3 -> 6", "ScalingActive", "ValidMetricFound"):
        assert needle in out, (needle, out)


def test_usage_errors_exit_2() -> None:
    rc, _, err = run_main()
    assert rc == 2 and ("SCENARIO" in err or "required" in err)
    rc, _, err = run_main("a.yaml", "-o", "xml")
    assert rc == 2 and "invalid choice" in err
