"""`python -m autoscaler demo`: a live, self-contained demonstration of both used-by cases."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    from autoscaler.demo.cli import main as _main

    return _main(argv)
