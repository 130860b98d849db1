"""The documentation is the project's own and true: linked from the README (its links resolve:
test_links.py), its examples run, and the flags, chart values and reasons it names exist."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from adapter.settings import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
OURS = ("adapter.md", "autoscaler.md", "migrating-from-prometheus-adapter.md", "troubleshooting.md")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def text(name: str) -> str:
    return (DOCS / name).read_text()


def yaml_blocks(doc: str) -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", doc, re.DOTALL)


def simulate_reference() -> str:
    """docs/autoscaler.md's `simulate` section: the scenario file's reference and its examples."""
    doc = text("autoscaler.md")
    section = doc[doc.index("\n## `simulate`"):]
    return section[:section.index("\n## ", 1)]


def test_the_readme_links_every_doc() -> None:
    readme = (ROOT / "README.md").read_text()
    linked = {Path(target).name for target in LINK.findall(readme) if target.startswith("docs/")}
    assert set(OURS) <= linked
    assert {p.name for p in DOCS.glob("*.md")} <= linked


def test_simulate_minimal_example_runs() -> None:
    minimal = yaml_blocks(simulate_reference())[0]
    proc = subprocess.run([sys.executable, "-m", "autoscaler", "simulate", "-", "-o", "json"], input=minimal,
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["currentReplicas"], out["desiredReplicas"]) == (2, 4)  # 120 messages at 30 per replica


def test_simulate_full_example_is_the_example_file_and_passes_check(tmp_path: Path) -> None:
    full = next(b for b in yaml_blocks(simulate_reference()) if b.startswith("now:") and "expect:" in b)
    example = ROOT / "examples" / "scenarios" / "pods-http-requests.yaml"
    assert yaml.safe_load(full) == yaml.safe_load(example.read_text())
    path = tmp_path / "full.yaml"
    path.write_text(full)
    proc = subprocess.run([sys.executable, "-m", "autoscaler", "simulate", "--check", str(path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip().endswith(": ok"), proc.stdout + proc.stderr


def test_simulate_short_form_example_decides_as_the_full_one(tmp_path: Path) -> None:
    blocks = yaml_blocks(simulate_reference())
    short = next(b for b in blocks if "pods: {count:" in b and "expect:" in b)
    full = next(b for b in blocks if b.startswith("now:") and "expect:" in b and b is not short)
    outputs = []
    for name, block in (("short", short), ("full", full)):
        path = tmp_path / f"{name}.yaml"
        path.write_text(block)
        proc = subprocess.run([sys.executable, "-m", "autoscaler", "simulate", str(path), "-o", "json"],
                              capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert proc.returncode == 0, proc.stderr
        outputs.append(json.loads(proc.stdout))
    keys = ("desiredReplicas", "currentReplicas", "recommendation", "currentMetrics", "proposals")
    assert {k: outputs[0][k] for k in keys} == {k: outputs[1][k] for k in keys}
    assert outputs[0]["desiredReplicas"] == 6


def test_adapter_doc_names_every_flag_and_only_real_ones() -> None:
    options = {o for action in build_parser()._actions for o in action.option_strings if o.startswith("--")}
    doc = text("adapter.md")
    assert sorted(o for o in options - {"--help"} if f"`{o}" not in doc) == []
    named = set(re.findall(r"`(--[a-z0-9-]*[a-z0-9])[` =]", doc)) - {"--flag"}
    assert named and sorted(named - options) == []


def test_migration_guide_names_real_chart_values_and_flags() -> None:
    values = yaml.safe_load((ROOT / "charts" / "promscaler" / "values.yaml").read_text())
    doc = text("migrating-from-prometheus-adapter.md")
    section = doc[doc.index("**Chart values.**"):doc.index("## 2.")]
    ours = [row.split("|")[2] for row in section.splitlines() if row.startswith("| `") or row.startswith("| rules")]
    keys = {k for cell in ours for k in re.findall(r"`([a-zA-Z][\w.]*\w)`", cell) if "." in k}
    # rules.config.<key> are the rules file's own keys (rules, externalRules, resourceRules)
    keys = {"rules.config" if k.startswith("rules.config.") else k for k in keys}
    keys |= {"adapter.externalMetrics.enabled", "adapter.customMetrics.enabled", "rules.existingConfigMap"}
    missing = []
    for key in sorted(keys):
        node = values
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                missing.append(key)
                break
            node = node[part]
    assert len(keys) > 10 and missing == []
    options = {o for action in build_parser()._actions for o in action.option_strings}
    flags = set(re.findall(r"`(--[a-z0-9-]*[a-z0-9])`", doc))
    assert flags and sorted(flags - options) == []


def test_troubleshooting_reasons_are_the_controllers() -> None:
    source = "\n".join(p.read_text() for p in (ROOT / "autoscaler").rglob("*.py"))
    doc = text("troubleshooting.md")
    reasons = set(re.findall(r"`((?:Failed|Invalid|Scale|Scaling|TooFew|TooMany)[A-Za-z]+)`", doc)) - {"FailedGet"}
    assert len(reasons) >= 8
    assert sorted(r for r in reasons if f'"{r}"' not in source and not r.endswith("*")) == []


def test_scale_to_zero_example_scales_to_zero_and_back(tmp_path: Path) -> None:
    doc = text("controls.md")
    section = doc[doc.index("## Scale to zero"):doc.index("## Activation from zero")]
    spec = yaml.safe_load(yaml_blocks(section)[0])
    assert "activationThreshold" not in str(spec)  # the HPA's own scaling to zero, no control
    assert spec["spec"]["minReplicas"] == 0
    base = {"now": "2026-01-01T00:10:00Z", "hpa": spec}
    down = dict(base, scaleTarget={"spec": {"replicas": 2}, "status": {"replicas": 2, "selector": "app=worker"}},
                history={"recommendations": []},
                metrics={"external": [{"metricName": "queue_messages_ready", "metricLabels": {"queue": "worker_tasks"},
                                       "value": "0"}]})
    up_hpa = dict(spec, status={"conditions": [{"type": "ScaledToZero", "status": "True"}]})
    up = dict(base, hpa=up_hpa,
              scaleTarget={"spec": {"replicas": 0}, "status": {"replicas": 0, "selector": "app=worker"}},
              metrics={"external": [{"metricName": "queue_messages_ready", "metricLabels": {"queue": "worker_tasks"},
                                     "value": "90"}]})
    path = tmp_path / "zero.yaml"
    path.write_text(yaml.safe_dump_all([down, up]))
    proc = subprocess.run([sys.executable, "-m", "autoscaler", "simulate", str(path), "-o", "json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    first, second = (json.loads(line) for line in proc.stdout.splitlines())
    assert first["desiredReplicas"] == 0
    assert {"type": "ScaledToZero", "status": "True"}.items() <= next(
        c for c in first["conditions"] if c["type"] == "ScaledToZero").items()
    assert second["desiredReplicas"] == 3


@pytest.mark.parametrize("source", ["README.md", "examples/README.md", "apiservice/README.md", "CONTRIBUTING.md",
                                    *(f"docs/{name}" for name in OURS)])
def test_commands_are_installed_ones_or_the_venvs(source: str) -> None:
    """`python -m ...` with the system Python fails (the project is installed in .venv)."""
    doc = (ROOT / source).read_text()
    bare = [m.group(0) for m in re.finditer(r"(\S*)python3? -m \S+", doc) if not m.group(1).endswith(".venv/bin/")]
    assert bare == []
