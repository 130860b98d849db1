"""The human-readable `simulate` report: a metrics table, the adjustments, the normalization
steps, the final number and the conditions. Colour only on a terminal (rich decides; NO_COLOR works)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..decision import Decision, DecisionInput
from ..decision.controls import CONTROL_LINES
from ..decision.kubeversion import CURRENT

__all__ = ["render"]


def _ratio(value: float | None) -> str:
    if value is None:
        return "-"
    if value != value or value in (float("inf"), float("-inf")):
        return str(value)
    return f"{value:.3f}"


def render(results: Sequence[tuple[str, DecisionInput, Decision]], out: TextIO) -> None:
    tty = hasattr(out, "isatty") and out.isatty()
    console = Console(file=out, highlight=False, markup=False, width=None if tty else 160)
    for n, (label, inp, d) in enumerate(results):
        if n:
            console.print()
        _header(console, label, inp, d)
        if d.details:
            _metrics(console, d)
        for line in d.explanation:
            if "metrics failed" in line or line.startswith(("no metric could", "the target's selector")):
                console.print(Text(f"  {line}", style="yellow"))
        if d.recommendation is not None and d.details:
            console.print(f"  recommendation: {d.recommendation}")
        for step in d.steps:
            console.print(f"  {step}")
        _verdict(console, d)


def _header(console: Console, label: str, inp: DecisionInput, d: Decision) -> None:
    spec = inp.spec
    console.print(Text(label, style="bold"))
    ref = spec.scale_target_ref
    console.print(
        f"  target {ref.kind}/{ref.name}: {d.current_replicas} replicas "
        f"(min {spec.min_replicas}, max {spec.max_replicas}; "
        f"{'behavior' if spec.behavior else 'no behavior: legacy rules'}), "
        f"{len(inp.pods)} pods selected, at {inp.now.isoformat().replace('+00:00', 'Z')}"
    )
    if inp.config.kube_version != CURRENT:
        console.print(f"  decided as Kubernetes {inp.config.kube_version}'s HPA controller", style="dim")
    for line in d.explanation:
        if line.startswith(("fresh controller", "the target", "current ")):
            console.print(f"  {line}", style="dim")
        elif line.startswith(CONTROL_LINES):
            console.print(f"  {line}", style="cyan")


def _metrics(console: Console, d: Decision) -> None:
    """The table of metrics, then each metric's errors and notes."""
    table = Table(box=None, pad_edge=False, padding=(0, 2))
    table.add_column("metric", justify="left")
    for col in ("current", "target", "ratio"):
        table.add_column(col, justify="right")
    table.add_column("proposal", justify="right", style="bold")
    for det in d.details:
        if det.error is not None:
            table.add_row(f"{det.type} {det.name}", Text("error", style="red"), det.target, "-", "-")
        else:
            table.add_row(f"{det.type} {det.name}", det.current or "-", det.target, _ratio(det.ratio),
                          str(det.replicas))
    console.print(table)
    for det in d.details:
        if det.error is not None:
            console.print(Text(f"  {det.type} {det.name}: {det.error}", style="red"))
        for note in det.notes:
            console.print(f"  {det.type} {det.name}: {note}")


def _verdict(console: Console, d: Decision) -> None:
    if d.scale:
        console.print(Text(f"  => scale {d.current_replicas} -> {d.desired_replicas}", style="bold green"))
    else:
        console.print(Text(f"  => stay at {d.current_replicas}", style="bold"))
    for c in d.conditions:
        style = "green" if c.status == "True" else "yellow"
        if c.type == "ScalingActive" and c.status != "True":
            style = "red"
        console.print(Text.assemble("  ", (f"{c.type:<15}", "bold"), (f"{c.status:<6}", style),
                                    (f"{c.reason:<20}", style), (c.message, "dim")))
