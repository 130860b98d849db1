"""What the demo shows while it runs: a live rich view, or plain log lines (`--no-tui`)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from autoscaler.demo.monitor import ReplicaChange, Sample
from autoscaler.demo.scenario import Workload


def in_target_unit(value: float, target_text: str) -> str:
    """`value` spelled as the target is (`540m` next to `500m`, `18.1` next to `30`)."""
    if target_text.endswith("m"):
        return f"{round(value * 1000)}m"
    return f"{value:.1f}".removesuffix(".0")


def metric_text(w: Workload, s: Sample) -> str:
    """The metric against its target, in the target's unit: `540m / 500m per pod`."""
    if s.metric is None:
        return f"unavailable ({s.metric_error})" if s.metric_error else "unavailable"
    if w.metric_type == "Pods":
        return f"{in_target_unit(s.metric, w.target_text)} / {w.target_text} per pod"
    return f"{in_target_unit(s.metric, w.target_text)} / {w.target_text} per replica (queue {s.served:.0f})"


def replicas_text(s: Sample) -> str:
    desired = "?" if s.desired is None else str(s.desired)
    return f"{s.replicas} (ready {s.ready}, desired {desired})"


_SHORT = {"AbleToScale": "able", "ScalingActive": "active", "ScalingLimited": "limited", "ScaledToZero": "zero"}


def conditions_text(s: Sample) -> Text:
    """`able ✓ ReadyForNewScale  active ✓ ValidMetricFound  limited ✗ DesiredWithinRange`, colored
    by whether the condition is good news (ScalingLimited=True is not)."""
    out = Text()
    for c in s.conditions:
        good = (c["status"] == "True") != (c["type"] == "ScalingLimited")
        out.append(f"{_SHORT.get(c['type'], c['type'])} ", style="dim")
        out.append("✓ " if c["status"] == "True" else "✗ " if c["status"] == "False" else "? ",
                   style="green" if good else "red")
        out.append(f"{c['reason']}  ", style="" if good else "yellow")
    return out if s.conditions else Text("none yet", style="dim")


def workload_panel(w: Workload, s: Sample | None) -> Panel:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True, min_width=len("conditions"))
    grid.add_column(ratio=1, no_wrap=True, overflow="ellipsis")  # one line per row: the view must fit 80x24
    if s is None:
        grid.add_row("", Text("starting…", style="dim"))
    else:
        grid.add_row("metric", Text.assemble((metric_text(w, s), "bold"),
                                             (f"  ({w.metric_type}, AverageValue, as served)", "dim")))
        grid.add_row("load", f"{s.load:.2f} {w.load_short}")
        grid.add_row("replicas", Text.assemble((str(s.replicas), "bold"), f"  ready {s.ready}, desired "
                                               f"{'?' if s.desired is None else s.desired}"))
        grid.add_row("conditions", conditions_text(s))
        grid.add_row("decision", s.reason)
    return Panel(grid, title=Text(w.title, style="bold"), title_align="left")


def render(workloads: Sequence[Workload], latest: dict[str, Sample], changes: dict[str, list[ReplicaChange]],
           t: float, duration: float, settings: Sequence[str], width: int = 80, height: int = 24):
    """The live view. Narrow (< 150 columns) it stacks the workloads and keeps to 24 lines: the
    settings in one line (all of them were printed above it at start), the last 4 scale events at 24 lines."""
    panels = [workload_panel(w, latest.get(w.name)) for w in workloads]
    wide = width >= 150
    body: RenderableType
    if wide:
        side_by_side = Table.grid(expand=True, padding=(0, 1))
        for _ in panels:
            side_by_side.add_column(ratio=1)
        side_by_side.add_row(*panels)
        body = side_by_side
    else:
        body = Group(*panels)
    recent = sorted(((c, w.name) for w in workloads for c in changes[w.name]), key=lambda x: x[0].t)
    recent = recent[-6:] if wide else recent[-max(1, min(6, height - 20)):]
    events = Table.grid(padding=(0, 1))
    events.add_column(no_wrap=True, min_width=20)
    events.add_column(no_wrap=True, overflow="ellipsis", ratio=1)
    for c, name in recent:
        up = c.after > c.before
        head = Text.assemble(f"{c.t:6.1f}s ", ("▲ " if up else "▼ ", "green" if up else "red"),
                             (f"{name} {c.before}→{c.after}", "bold"))
        events.add_row(head, Text(c.reason or "…", style="dim"))
    shown = Text("\n".join(settings) if wide else "; ".join(settings), style="dim", no_wrap=True,
                 overflow="ellipsis")
    parts = [shown, body, Panel(events if recent else Text("no scale events yet", style="dim"),
                                title="scale events", title_align="left")]
    return Panel(Group(*parts), title=f"promscaler demo  t={t:5.1f}s / {duration:.0f}s", title_align="left",
                 subtitle="Ctrl-C stops and writes the report", subtitle_align="right")


def log_line(w: Workload, s: Sample) -> str:
    return (f"[{s.t:6.1f}s] {w.name:<6} load {s.load:5.2f} {w.load_short} | {w.metric} {metric_text(w, s)} "
            f"| replicas {replicas_text(s)} | {s.reason}")


def change_line(name: str, c: ReplicaChange) -> str:
    return f"[{c.t:6.1f}s] {name:<6} scaled {c.before} -> {c.after}: {c.reason}"
