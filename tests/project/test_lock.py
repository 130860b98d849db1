"""Set-up is reproducible: constraints.txt (written by scripts/lock.sh) pins every dependency that
pyproject.toml names, and everything they pull in, and scripts/setup.sh installed exactly those
versions into the environment these tests run in."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "constraints.txt"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)$")
# Installed by scripts/setup.sh beside pyproject.toml's dependencies (Helm's engine for the chart tests).
EXTRA_INSTALLS = {"helm-sdkpy"}


def pins() -> dict[str, str]:
    out: dict[str, str] = {}
    for line in LOCK.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = PIN.match(line)
        assert m, f"constraints.txt: {line!r} is not name==version"
        name = canonicalize_name(m.group(1))
        assert name not in out, f"constraints.txt: {name} pinned twice"
        out[name] = m.group(2)
    return out


def declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in project.get("optional-dependencies", {}).values():
        reqs += [Requirement(r) for r in extra]
    return reqs


def closure(roots: list[Requirement]) -> set[str]:
    """Normalized names of the roots and of everything their installed distributions require
    (markers evaluated for this interpreter, with the extras asked for)."""
    names: set[str] = set()
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [(r.name, frozenset(r.extras)) for r in roots]
    while todo:
        name, extras = todo.pop()
        key = canonicalize_name(name)
        if (key, extras) in seen:
            continue
        seen.add((key, extras))
        names.add(key)
        for spec in metadata.requires(name) or []:
            req = Requirement(spec)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in (extras or {""})):
                todo.append((req.name, frozenset(req.extras)))
    return names


def test_every_line_is_an_exact_pin() -> None:
    assert len(pins()) > 40


def test_the_lock_covers_every_dependency_pyproject_names() -> None:
    names = {canonicalize_name(r.name) for r in declared()} | EXTRA_INSTALLS
    assert {"pyyaml", "kubernetes", "pytest", "matplotlib", "helm-sdkpy"} <= names  # the parsing is live
    missing = sorted(names - pins().keys())
    assert missing == [], f"not in constraints.txt (run ./scripts/lock.sh): {missing}"


def test_setup_installed_the_locked_versions_of_everything_pulled_in() -> None:
    locked = pins()
    wanted = closure(declared() + [Requirement(n) for n in EXTRA_INSTALLS])
    assert {"pyyaml", "pandas", "cffi", "urllib3"} <= wanted  # transitive ones too (extras, helm-sdkpy)
    missing = sorted(wanted - locked.keys())
    assert missing == [], f"pulled in but not in constraints.txt (run ./scripts/lock.sh): {missing}"
    differ = {n: (metadata.version(n), locked[n]) for n in wanted if metadata.version(n) != locked[n]}
    assert differ == {}, f"installed != locked (run ./scripts/setup.sh): {differ}"

