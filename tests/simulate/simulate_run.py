"""`autoscaler simulate` called in-process on YAML text, for the tests that run it many times."""

from __future__ import annotations

import io
import sys
from typing import Any

import yaml

from autoscaler.simulate import main


def run_text(text: str, *args: str) -> tuple[int, str, str]:
    """`autoscaler simulate - ARGS` with `text` on stdin: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdin
    sys.stdin = io.StringIO(text)
    try:
        rc = main(["-", *args], stdout=out, stderr=err)
    finally:
        sys.stdin = old
    return rc, out.getvalue(), err.getvalue()


def run_doc(doc: Any, *args: str) -> tuple[int, str, str]:
    return run_text(yaml.safe_dump(doc, sort_keys=False), *args)
