"""The container image without Docker: the Dockerfile's own build steps (WORKDIR, COPY, ENV, RUN),
run in order on this machine with the image's paths mapped into a temporary directory, give a
virtual environment in which every entry point works, without the sandbox or the demo extras.

The build context is what .dockerignore lets in (tests/manifests/test_dockerfile.py checks that).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import dockerfile_instructions

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
PREFIX = "/opt/promscaler"


def instructions() -> list[tuple[str, str]]:
    return dockerfile_instructions(ROOT / "Dockerfile")


def stages() -> list[list[tuple[str, str]]]:
    out: list[list[tuple[str, str]]] = []
    for op, rest in instructions():
        if op == "FROM":
            out.append([])
        elif out:
            out[-1].append((op, rest))
    return out


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Run the build stage's steps; returns the environment the runtime stage sets and the pip log."""
    base = tmp_path_factory.mktemp("image")
    prefix = base / "opt" / "promscaler"
    bindir = base / "base-bin"  # the base image's `python`
    bindir.mkdir()
    (bindir / "python").symlink_to(Path(getattr(sys, "_base_executable", sys.executable)).resolve())
    mapped = lambda p: str(base / p.lstrip("/")) if p.startswith("/") else p  # noqa: E731
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{bindir}:{env['PATH']}"
    cwd = base
    log = []
    build, runtime = stages()
    for op, rest in build:
        if op == "ENV":
            env.update(dict(re.findall(r"(\w+)=(\S+)", rest)))
        elif op == "WORKDIR":
            cwd = Path(mapped(rest))
            cwd.mkdir(parents=True, exist_ok=True)
        elif op == "COPY":
            *sources, dest = rest.split()
            for src in sources:
                target = cwd / dest if not dest.startswith("/") else Path(mapped(dest))
                if (ROOT / src).is_dir():
                    shutil.copytree(ROOT / src, target / "" if dest.endswith("/") and src.endswith("/") else target,
                                    dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
                else:
                    target.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(ROOT / src, target / Path(src).name)
        elif op == "RUN":
            command = rest.replace(PREFIX, str(prefix))
            proc = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True,
                                  timeout=900)
            log.append(proc.stdout + proc.stderr)
            assert proc.returncode == 0, command + "\n" + proc.stdout[-3000:] + proc.stderr[-3000:]
    run_env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    for op, rest in runtime:
        if op == "ENV":
            for key, value in re.findall(r"(\w+)=(\S+)", rest):
                run_env[key] = value.replace(PREFIX, str(prefix)).replace("$PATH", run_env["PATH"])
    workdir = base / "tmp"
    workdir.mkdir()
    return {"env": run_env, "prefix": prefix, "cwd": workdir, "log": "\n".join(log)}


def run(image: dict, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), cwd=image["cwd"], env=image["env"], input=stdin, capture_output=True,
                          text=True, timeout=120)


def test_the_build_installs_without_deprecation_warnings(image: dict, tmp_path: Path) -> None:
    assert "Successfully installed" in image["log"]
    # pip shows the build backend's warnings only with -v: build the wheel of the same files that way
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for package in ("promscaler", "adapter", "autoscaler", "apiservice"):
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(tmp_path / "dist"),
                          str(src)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert list((tmp_path / "dist").glob("promscaler-*.whl"))
    assert "deprecat" not in (out.stdout + out.stderr).lower(), out.stdout[-3000:]


def test_the_runtime_stage_is_lean_and_unprivileged(image: dict) -> None:
    runtime = stages()[-1]
    runs = " ".join(rest for op, rest in runtime if op == "RUN")
    assert not re.search(r"apt-get|gcc|build-essential|pip install", runs)
    assert [rest for op, rest in runtime if op == "USER"] == ["10001:10001"]
    probe = ("import importlib.util as u; "
             "print([m for m in ('kubesim', 'rich', 'matplotlib', 'pip', 'adapter', 'autoscaler') if u.find_spec(m)])")
    out = run(image, "python", "-c", probe)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['adapter', 'autoscaler']"
    assert shutil.which("promscaler-adapter", path=image["env"]["PATH"]) == str(image["prefix"] / "bin" /
                                                                               "promscaler-adapter")


def test_declared_dependencies(image: dict) -> None:
    """No direct dependency that no code imports (pydantic and aiohttp-retry come with fastapi and
    kubernetes); the demo's libraries only in the demo extra."""
    probe = "import importlib.metadata as m, json; print(json.dumps(m.requires('promscaler')))"
    out = run(image, "python", "-c", probe)
    assert out.returncode == 0, out.stderr
    requires = json.loads(out.stdout)
    names = {re.split(r"[<>=;\[ ]", r)[0].lower(): r for r in requires}
    assert "pydantic" not in names and "aiohttp-retry" not in names
    assert "aiohttp" in names  # the kubernetes asyncio client's transport, whose exceptions the controller catches
    for name in ("rich", "matplotlib"):
        assert 'extra == "demo"' in names[name], names[name]


def test_the_image_installs_the_locked_versions(image: dict) -> None:
    """Every package in the image is at the version constraints.txt pins (what the suite ran with)."""
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", (ROOT / "constraints.txt").read_text(), re.M))
    pins = {re.sub(r"[-_.]+", "-", k).lower(): v for k, v in pins.items()}
    probe = ("import importlib.metadata as m, json; "
             "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))")
    out = run(image, "python", "-c", probe)
    assert out.returncode == 0, out.stderr
    installed = {re.sub(r"[-_.]+", "-", k).lower(): v for k, v in json.loads(out.stdout).items()}
    installed.pop("promscaler")
    assert len(installed) > 20
    assert {k: v for k, v in installed.items() if pins.get(k) != v} == {}


@pytest.mark.parametrize("command", [
    ("promscaler-adapter", "--help"),
    ("promscaler-autoscaler", "--help"),
    ("promscaler-autoscaler", "run", "--help"),
    ("promscaler-autoscaler", "simulate", "--help"),
    ("kubectl-promscaler", "--help"),
    ("kubectl-promscaler", "explain", "--help"),
    ("python", "-m", "apiservice.certs", "--help"),
], ids=lambda c: " ".join(c))
def test_every_entry_point_answers_help(image: dict, command: tuple[str, ...]) -> None:
    out = run(image, *command)
    assert out.returncode == 0, out.stderr
    assert "usage:" in out.stdout and "Traceback" not in out.stderr


def test_the_demo_says_in_one_line_that_it_is_not_in_the_image(image: dict) -> None:
    for command in (("promscaler-autoscaler", "demo"), ("python", "-m", "autoscaler", "demo", "--no-tui")):
        out = run(image, *command)
        assert out.returncode == 2 and out.stdout == ""
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("autoscaler: demo: not part of this installation ("), out.stderr
        assert lines[0].endswith("run the demo from a checkout with ./scripts/demo.sh")


def test_simulate_works_in_json_and_names_the_extra_for_the_table(image: dict) -> None:
    scenario = (ROOT / "examples" / "scenarios" / "pods-http-requests.yaml").read_text()
    out = run(image, "promscaler-autoscaler", "simulate", "-", "-o", "json", stdin=scenario)
    assert out.returncode == 0, out.stderr
    assert '"desiredReplicas":6' in out.stdout
    table = run(image, "promscaler-autoscaler", "simulate", "-", stdin=scenario)
    assert table.returncode == 2 and "Traceback" not in table.stderr
    assert table.stderr.strip() == ("autoscaler: simulate: it needs the demo extra: pip install 'promscaler[demo]' "
                                    "(or -o json)")
