"""A user's clone is whole: nothing in the repository reads or names a directory beside it, and the
example scenarios the tests and docs use are the project's own."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
# Spelled in two parts so that this file does not name what it looks for.
SIBLING = "../" + "shared"
NAMES = (SIBLING, "shared" + "/spec/", "shared" + "/examples/")


def tracked_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / name for name in out.decode().split("\0") if name]


def test_no_tracked_file_names_a_sibling_directory() -> None:
    files = tracked_files()
    assert len(files) > 100
    offenders = []
    for path in files:
        if not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        if any(name in text for name in NAMES):
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def test_example_scenarios_are_the_projects_own() -> None:
    scenarios = sorted(p.name for p in (ROOT / "examples" / "scenarios").glob("*.yaml"))
    assert scenarios == ["cpu-unready-pod.yaml", "external-queue-average-value.yaml", "pods-http-requests.yaml",
                         "scale-down-policies.yaml"]
    tracked = {str(p.relative_to(ROOT)) for p in tracked_files()}
    assert {f"examples/scenarios/{name}" for name in scenarios} <= tracked



def test_pre_commit_runs_the_checks_ci_runs() -> None:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    entries = {hook["id"]: hook["entry"] for repo in config["repos"] for hook in repo["hooks"]}
    assert set(entries) == {"ruff", "mypy"}
    ci = (ROOT / ".ci" / "run").read_text()
    for entry in entries.values():
        command = " ".join(entry.split()[:2]) if "ruff" in entry else entry
        assert command in ci, command
        assert (ROOT / entry.split()[0]).exists()  # the project's own tools, as set up by scripts/setup.sh
