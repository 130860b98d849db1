"""`autoscaler simulate`: one decision per scenario, offline (format: docs/autoscaler.md, "The scenario file").

Scenario -> `DecisionInput` -> `decide()` (the live controller's code) -> a readable report, JSON
lines (one per scenario, with its file and document number), or a check against `expect:` (as
text or JSON lines). Exit status: 0 computed, 1 a check differed or had nothing to check, 2 invalid
input; with several files, the worst.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TextIO

from autoscaler.commandline import ArgError, Parser, add_kube_version_flag
from autoscaler.decision.kubeversion import KubeVersion

from ..decision import Decision, decide
from ..decision.conditions import merged
from .output import check, decision_json
from .scenario import Scenario, ScenarioError, build_scenario, load_scenarios, paused_gc

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="promscaler-autoscaler simulate",
        description="What would the Kubernetes HPA controller do with this autoscaler, these pods and metrics?",
    )
    p.add_argument("files", nargs="+", metavar="SCENARIO", help="scenario file(s), YAML or JSON; '-' for stdin")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text", help="output format")
    p.add_argument("--check", action="store_true",
                   help="compare each scenario with its expect: block; exit 1 on differences or without one")
    add_kube_version_flag(p)  # a scenario's kubernetesVersion: wins over it
    return p


@dataclass(frozen=True)
class _Result:
    file: str
    document: int     # 1-based, among the file's documents
    scenario: Scenario
    decision: Decision


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Every file and document is reported; the exit status is the worst one (0 computed, 1 a
    check failed, 2 invalid input)."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    try:
        args = _parser().parse_args(list(argv) if argv is not None else None)
    except ArgError as exc:
        print(f"autoscaler simulate: {exc}", file=err)
        return 2
    if args.files.count("-") > 1:
        print("autoscaler simulate: '-' (stdin) may be given once", file=err)
        return 2
    worst = 0
    results: list[_Result] = []
    for source in args.files:
        for outcome in _decide_file(source, args.kubernetes_version):
            if isinstance(outcome, str):
                print(f"autoscaler simulate: {outcome}", file=err)
                worst = 2
            elif args.check:
                worst = max(worst, _check(outcome, args.output, out))
            elif args.output == "json":
                line = {"file": outcome.file, "document": outcome.document, **decision_json(outcome.decision)}
                out.write(json.dumps(line, separators=(",", ":")) + "\n")
            else:
                results.append(outcome)
    if results:
        from .report import render
        render([(r.scenario.label, r.scenario.input, r.decision) for r in results], out)
    return worst


def _decide_file(source: str, kube_version: KubeVersion) -> Iterator[_Result | str]:
    """Each document's decision, or the one-line error of a document or of the whole file."""
    try:
        documents = load_scenarios(source)
    except ScenarioError as exc:
        yield str(exc)
        return
    file = "<stdin>" if source == "-" else source
    for index, (label, doc) in enumerate(documents, 1):
        try:
            with paused_gc():
                scenario = build_scenario(label, doc, kube_version=kube_version)
                decision = decide(scenario.input)
                if scenario.conditions:  # the status the sync writes: the conditions it did not set stay
                    kept = merged(scenario.conditions, decision.conditions)
                    decision = dataclasses.replace(decision, conditions=kept)
        except ScenarioError as exc:
            yield f"{label}: {exc}"
        except RecursionError:
            yield f"{label}: nested too deeply"
        else:
            yield _Result(file, index, scenario, decision)


def _check(result: _Result, output: str, out: TextIO) -> int:
    """Compare one decision with its scenario's `expect:` (a scenario without one fails)."""
    expect = result.scenario.expect
    if expect is None:
        diffs = ["no expect: block, nothing to check"]
    else:
        try:
            diffs = check(expect, decision_json(result.decision))
        except RecursionError:
            diffs = ["expect: nested too deeply"]
    if output == "json":
        line = {"file": result.file, "document": result.document, "scenario": result.scenario.label,
                "result": "fail" if diffs else "pass", "differences": diffs}
        out.write(json.dumps(line, separators=(",", ":")) + "\n")
    elif diffs:
        print(f"{result.scenario.label}: FAILED: " + "; ".join(diffs), file=out)
    else:
        print(f"{result.scenario.label}: ok", file=out)
    return 1 if diffs else 0
