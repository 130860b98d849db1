"""Benchmark: what KEDA's scalingModifiers cost a replay. A ScaledObject with two prometheus
triggers is decided with and without `advanced.scalingModifiers` (the composite metric: the
formula evaluated at every decision, autoscaler/decision/formula.py), and the formula alone.
Decisions per CPU-second, so the figure says how much longer a backtest of such a ScaledObject
takes. Writes bench/results/keda.json.

    python bench/keda_bench.py [--count 20000]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoscaler.decision import DecisionInput, ExternalReading, decide
from autoscaler.decision.formula import compile_formula
from autoscaler.decision.keda import read_scaled_object

NOW = datetime(2026, 3, 2, tzinfo=UTC)
TRIGGER = {"type": "prometheus", "metadata": {"query": "sum(queue_messages_ready)", "threshold": "10"}}
PLAIN: dict[str, Any] = {
    "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": "worker"},
    "spec": {"scaleTargetRef": {"name": "worker"},
             "triggers": [{**TRIGGER, "name": "orders"}, {**TRIGGER, "name": "refunds"}]}}
FORMULA = "orders > 2 ? (orders + refunds)/2 : 1"


def per_second(fn: Any, count: int) -> float:
    started = time.process_time()
    for _ in range(count):
        fn()
    return count / (time.process_time() - started)


def decisions(doc: dict[str, Any], count: int) -> float:
    inp = DecisionInput(spec=read_scaled_object(doc).spec, current_replicas=3, status_replicas=3, pods=(),
                        readings=(ExternalReading((100_000,), NOW), ExternalReading((20_000,), NOW)), now=NOW)
    return per_second(lambda: decide(inp), count)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000)
    args = parser.parse_args()
    composite = copy.deepcopy(PLAIN)
    composite["spec"]["advanced"] = {"scalingModifiers": {"formula": FORMULA, "target": "30"}}
    formula = compile_formula(FORMULA, ["orders", "refunds"])
    result = {
        "decisionsPerCpuSecond": {"twoTriggers": round(decisions(PLAIN, args.count)),
                                  "scalingModifiers": round(decisions(composite, args.count))},
        "formulaEvaluationsPerCpuSecond": round(per_second(lambda: formula.value({"orders": 100.0, "refunds": 20.0}),
                                                           args.count)),
        "formula": FORMULA,
    }
    print(json.dumps(result, indent=2))
    out = Path(__file__).resolve().parent / "results" / "keda.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
