"""examples/: valid Kubernetes objects, HPA and HorizontalAutoscaler twins, and scenarios that
`simulate --check` passes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
K8S = "1.36.0"
CASES = ("web", "worker")


def manifests():
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        if "scenarios" in path.parts or path.name.endswith("-patch.yaml"):  # patches: test_readme_cluster_steps
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                yield path, doc


def test_examples_exist_for_both_cases():
    for case in CASES:
        for name in ("horizontalautoscaler.yaml", "hpa.yaml"):
            assert (EXAMPLES / case / name).is_file()
        assert list((EXAMPLES / case / "scenarios").glob("*.yaml"))
    assert (EXAMPLES / "adapter-rules.yaml").is_file()


def test_builtin_kinds_validate_against_the_kubernetes_schema():
    checked = 0
    for _path, doc in manifests():
        if doc["apiVersion"].startswith(("promscaler.io/", "monitoring.coreos.com/")):
            continue
        kubernetes_validate.validate(doc, K8S, strict=True)
        checked += 1
    assert checked >= 9


@pytest.mark.parametrize("case", CASES)
def test_horizontalautoscaler_is_the_hpa_with_two_lines_changed(case):
    ours = yaml.safe_load((EXAMPLES / case / "horizontalautoscaler.yaml").read_text())
    hpa = yaml.safe_load((EXAMPLES / case / "hpa.yaml").read_text())
    assert (ours["apiVersion"], ours["kind"]) == ("promscaler.io/v1alpha1", "HorizontalAutoscaler")
    assert (hpa["apiVersion"], hpa["kind"]) == ("autoscaling/v2", "HorizontalPodAutoscaler")
    assert ours["spec"] == hpa["spec"] and ours["metadata"] == hpa["metadata"]


def test_rules_configmap_is_a_parsable_adapter_config():
    from adapter.rules import parse_rules  # the adapter's own parser

    cm = yaml.safe_load((EXAMPLES / "adapter-rules.yaml").read_text())
    config = parse_rules(cm["data"]["config.yaml"])
    assert len(config.rules) == 1 and len(config.external_rules) == 1


def test_scenarios_pass_simulate_check():
    files = sorted(str(p) for p in EXAMPLES.rglob("scenarios/*.yaml"))
    proc = subprocess.run([sys.executable, "-m", "autoscaler", "simulate", "--check", *files],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    docs = sum(1 for f in files for d in yaml.safe_load_all(Path(f).read_text()) if d)
    # web and worker: 3 each, worker/scenarios/controls.yaml: 4; examples/scenarios: 4
    assert proc.stdout.count("ok") >= docs == 14
