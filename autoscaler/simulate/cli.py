"""`autoscaler simulate`: one decision per scenario, offline (format: docs/simulate.md).

Scenario -> `DecisionInput` -> `decide()` (the live controller's code) -> JSON lines, a check
against `expect:`, or a readable report. Exit status: 0 computed, 1 a check differed, 2 invalid input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TextIO

from ..decision import decide
from .output import check, decision_json
from .scenario import Scenario, ScenarioError, build_scenario, load_scenarios

__all__ = ["main"]


class _ArgError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line and exit status 2, without argparse's exit."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise _ArgError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="autoscaler simulate",
        description="What would the Kubernetes HPA controller do with this autoscaler, these pods and metrics?",
    )
    p.add_argument("files", nargs="+", metavar="SCENARIO", help="scenario file(s), YAML or JSON; '-' for stdin")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text", help="output format")
    p.add_argument("--check", action="store_true", help="compare each scenario with its expect: block; exit 1 on differences")
    return p


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    parser = _parser()
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except _ArgError as exc:
        print(f"autoscaler simulate: {exc}", file=err)
        return 2
    if args.files.count("-") > 1:
        print("autoscaler simulate: '-' (stdin) may be given once", file=err)
        return 2
    scenarios: list[Scenario] = []
    for source in args.files:
        try:
            for label, doc in load_scenarios(source):
                try:
                    scenarios.append(build_scenario(label, doc))
                except ScenarioError as exc:
                    raise ScenarioError(f"{label}: {exc}") from None
        except ScenarioError as exc:
            print(f"autoscaler simulate: {exc}", file=err)
            return 2
    results = [(s, decide(s.input)) for s in scenarios]
    if args.check:
        failed = 0
        for s, d in results:
            if s.expect is None:
                print(f"{s.label}: no expect: block, nothing checked", file=out)
                continue
            diffs = check(s.expect, decision_json(d))
            if diffs:
                failed += 1
                print(f"{s.label}: FAILED: " + "; ".join(diffs), file=out)
            else:
                print(f"{s.label}: ok", file=out)
        return 1 if failed else 0
    if args.output == "json":
        for _, d in results:
            out.write(json.dumps(decision_json(d), separators=(",", ":")) + "\n")
        return 0
    from .report import render
    render([(s.label, s.input, d) for s, d in results], out)
    return 0
