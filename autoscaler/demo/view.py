"""What the demo shows while it runs: a live rich view, or plain log lines (`--no-tui`)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from autoscaler.demo.monitor import ReplicaChange, Sample
from autoscaler.demo.scenario import Workload


def metric_text(w: Workload, s: Sample) -> str:
    if s.metric is None:
        return f"unavailable ({s.metric_error})" if s.metric_error else "unavailable"
    if w.metric_type == "Pods":
        return f"{s.metric:.2f}/pod"
    return f"queue {s.served:.0f} = {s.metric:.1f}/replica"


def replicas_text(s: Sample) -> str:
    desired = "?" if s.desired is None else str(s.desired)
    return f"{s.replicas} (ready {s.ready}, desired {desired})"


def conditions_text(s: Sample) -> Text:
    out = Text()
    for c in s.conditions:
        style = {"True": "green", "False": "red"}.get(c["status"], "yellow")
        if c["type"] == "ScalingLimited":
            style = "yellow" if c["status"] == "True" else "green"
        out.append(f"{c['type']}={c['status']}", style=style)
        out.append(f" ({c['reason']})  ", style="dim")
    return out if s.conditions else Text("none yet", style="dim")


def render(workloads: Sequence[Workload], latest: dict[str, Sample], changes: dict[str, list[ReplicaChange]],
           t: float, duration: float, settings: Sequence[str]):
    table = Table(expand=True, show_lines=True)
    for col, kw in (("workload", {"style": "bold", "no_wrap": True}), ("load", {}), ("metric (as served)", {}),
                    ("target", {}), ("replicas", {}), ("conditions", {"ratio": 2}), ("last decision", {"ratio": 3})):
        table.add_column(col, **kw)
    for w in workloads:
        s = latest.get(w.name)
        if s is None:
            table.add_row(w.name, "…", "…", w.target_text, "…", "…", "…")
            continue
        table.add_row(w.name, f"{s.load:.2f} {w.load_short}", metric_text(w, s), f"{w.target_text} AverageValue",
                      replicas_text(s), conditions_text(s), s.reason)
    recent = sorted(((c, w.name) for w in workloads for c in changes[w.name]), key=lambda x: x[0].t)[-6:]
    events = Table.grid(padding=(0, 1))
    for c, name in recent:
        arrow = Text("▲", style="green") if c.after > c.before else Text("▼", style="red")
        events.add_row(f"{c.t:6.1f}s", arrow, Text(f"{name} {c.before}→{c.after}", style="bold"),
                       Text(c.reason or "…", style="dim"))
    parts = [Text("\n".join(settings), style="dim"), table,
             Panel(events if recent else Text("no scale events yet", style="dim"), title="scale events", title_align="left")]
    return Panel(Group(*parts), title=f"promscaler demo  t={t:5.1f}s / {duration:.0f}s", title_align="left",
                 subtitle="Ctrl-C stops and writes the report", subtitle_align="right")


def log_line(w: Workload, s: Sample) -> str:
    return (f"[{s.t:6.1f}s] {w.name:<6} load {s.load:5.2f} {w.load_short} | {w.metric} {metric_text(w, s)} "
            f"(target {w.target_text}) | replicas {replicas_text(s)} | {s.reason}")


def change_line(name: str, c: ReplicaChange) -> str:
    return f"[{c.t:6.1f}s] {name:<6} scaled {c.before} -> {c.after}: {c.reason}"
