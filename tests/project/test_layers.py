"""The layers are one-way: the sandbox (kubesim) stands in for a Kubernetes API server, which knows
nothing of the adapter or the controller it serves; what it needs of them (the CRD) it reads as a
real API server does, from the manifest. The shared core (promscaler/), which both stand on, imports neither."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HIGHER = {"adapter", "autoscaler"}


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in a file, at any depth (functions, TYPE_CHECKING blocks)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
    return out


def test_kubesim_imports_nothing_from_the_adapter_or_the_controller() -> None:
    files = sorted((ROOT / "kubesim").glob("*.py"))
    assert len(files) > 5
    offenders = [f"{path.name}:{line}: {module}" for path in files for line, module in imported_modules(path)
                 if module.split(".")[0] in HIGHER]
    assert offenders == []


def test_the_shared_core_imports_neither_the_adapter_nor_the_controller() -> None:
    """`promscaler/` (the Kubernetes client among it) is the layer both stand on."""
    files = sorted((ROOT / "promscaler").glob("*.py"))
    assert {"kubeapi.py", "ratelimit.py"} <= {f.name for f in files}
    offenders = [f"{path.name}:{line}: {module}" for path in files for line, module in imported_modules(path)
                 if module.split(".")[0] in HIGHER]
    assert offenders == []


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The walk finds imports at any depth, both spellings."""
    source = tmp_path / "m.py"
    source.write_text("import os\ndef f():\n    from autoscaler.controller import crd\n    import adapter.settings\n")
    assert [m for _, m in imported_modules(source) if m.split(".")[0] in HIGHER] == [
        "autoscaler.controller", "adapter.settings"]
