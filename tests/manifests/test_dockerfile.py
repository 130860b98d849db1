"""The Dockerfile without Docker: slim base, non-root user, only what .dockerignore lets in, and
that build context really builds the package (a wheel, as `pip install .` in the image does)."""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from tests.support import dockerfile_instructions

from .conftest import ROOT

DOCKERFILE = (ROOT / "Dockerfile").read_text()


def _instructions() -> list[tuple[str, str]]:
    return dockerfile_instructions(ROOT / "Dockerfile")


def _ignored(rel: str, patterns: list[str]) -> bool:
    """.dockerignore semantics for the patterns used here: last match wins, `!` re-includes."""
    ignored = False
    parts = rel.split("/")
    for pat in patterns:
        neg = pat.startswith("!")
        pat = pat[1:] if neg else pat
        pat = pat.rstrip("/")
        anywhere = pat.startswith("**/")
        pat = pat.removeprefix("**/")
        # a pattern matches a path or one of its parent directories (from the context root);
        # `**/x` matches x at any depth
        if any(fnmatch.fnmatch("/".join(parts[: i + 1]), pat) or (anywhere and fnmatch.fnmatch(parts[i], pat))
               for i in range(len(parts))):
            ignored = not neg
    return ignored


def _context(dest: Path) -> Path:
    patterns = [ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines()
                if ln.strip() and not ln.startswith("#")]
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith((".venv", ".git/")) or not path.is_file() or _ignored(rel, patterns):
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    return dest


def test_base_image_and_user() -> None:
    ins = _instructions()
    froms = [rest for op, rest in ins if op == "FROM"]
    args = dict(re.findall(r"^ARG (\w+)=(\S+)", DOCKERFILE, re.MULTILINE))
    images = [args.get(f.split()[0].strip("${}"), f.split()[0]) for f in froms]
    assert images and all(re.fullmatch(r"python:3\.1[1-9]-slim(-\w+)?", i) for i in images), images
    users = [rest for op, rest in ins if op == "USER"]
    assert users and re.fullmatch(r"[1-9]\d*(:[1-9]\d*)?", users[-1]), "the image must end as a numeric non-root user"
    # the uid the manifests run as is the image's user
    assert users[-1].split(":")[0] == "10001"


def test_context_builds_the_package(tmp_path: Path) -> None:
    ctx = _context(tmp_path / "context")
    # everything the Dockerfile copies is in the context, nothing else of note is
    for op, rest in _instructions():
        if op == "COPY" and not rest.startswith("--from"):
            for src in rest.split()[:-1]:
                assert (ctx / src).exists(), f"COPY {src}: not in the build context"
    assert not (ctx / "tests").exists() and not (ctx / "kubesim").exists() and not (ctx / ".venv").exists()
    # The PEP 517 backend pip runs for `pip install .` in the image, as far as this venv allows
    # (it has no `wheel` package for bdist_wheel): the sdist, with its package list and entry points.
    dist = tmp_path / "dist"
    dist.mkdir()
    script = f"from setuptools import build_meta as b; print(b.build_sdist({str(dist)!r}))"
    out = subprocess.run([sys.executable, "-c", script], cwd=ctx, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    [sdist] = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for module in ("adapter/__main__.py", "adapter/security/serve.py", "autoscaler/__main__.py",
                   "apiservice/certs.py", "promscaler/status.py"):
        assert module in names, module
    with tarfile.open(sdist) as tar:
        [entry] = [m for m in tar.getmembers() if m.name.endswith(".egg-info/entry_points.txt")]
        entry_points = tar.extractfile(entry)
        assert entry_points is not None
        assert "promscaler-adapter = adapter.__main__:main" in entry_points.read().decode()
