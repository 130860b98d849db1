"""The PromQL the chart ships (alerts in files/alerts.yaml, the Grafana dashboard in
files/dashboard.json) and the metric names it reads, for the tests that check them against
promtool and against the components' real /metrics."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from .conftest import CHART

__all__ = ["ALERTS", "DASHBOARD", "EXTERNAL", "alert_exprs", "dashboard_exprs", "used_names"]

ALERTS: dict[str, Any] = yaml.safe_load((CHART / "files" / "alerts.yaml").read_text())
DASHBOARD: dict[str, Any] = json.loads((CHART / "files" / "dashboard.json").read_text())
# Series the rules read that are not promscaler's: kube-apiserver's APIService availability.
EXTERNAL = {"aggregator_unavailable_apiservice"}

# Grafana's variables, replaced by what they stand for at query time.
_VARIABLES = {"$__rate_interval": "5m", "$namespace": ".*", "$autoscaler": ".*"}
_KEYWORDS = {"sum", "max", "min", "avg", "count", "by", "on", "without", "unless", "and", "or", "rate", "le",
             "histogram_quantile", "ignoring", "group_left", "group_right", "bool", "offset", "absent"}


def alert_exprs() -> list[str]:
    return [r["expr"] for g in ALERTS["groups"] for r in g["rules"]]


def dashboard_exprs() -> list[str]:
    out = [t["expr"] for p in DASHBOARD["panels"] for t in p.get("targets", ())]
    out += [re.sub(r"^label_values\((.*), \w+\)$", r"\1", v["query"]) for v in DASHBOARD["templating"]["list"]
            if v.get("type") == "query"]
    for name, value in _VARIABLES.items():
        out = [e.replace(name, value) for e in out]
    return out


def used_names() -> set[str]:
    """Metric names in every shipped expression (label names, label values and functions left out)."""
    names: set[str] = set()
    for expr in alert_exprs() + dashboard_exprs():
        bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)           # string literals
        bare = re.sub(r"\{[^}]*\}", "{}", bare)                    # label matchers
        bare = re.sub(r"\b(by|on|without|ignoring)\s*\([^)]*\)", "", bare)  # grouping labels
        bare = re.sub(r"\[[^\]]*\]", "", bare)                     # ranges
        for token in re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", bare):
            if token not in _KEYWORDS and not re.fullmatch(r"\d*[smhdwy]", token):
                names.add(token)
    return names
