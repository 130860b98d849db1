"""Kubernetes' pod-name conventions: which pods a controller ever named.

Pod names change as ReplicaSets and pods come and go, so history is read by name pattern. The
adapter's Pods forecast derives the pattern from the pods that exist now (`workload_pattern`),
backtest and tune from the target's kind and name (`owner_pattern`): one table, so both pick
the same pods (a Deployment `web-canary` is not part of `web`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from adapter.promql import regex_escape

__all__ = ["owner_pattern", "workload_pattern"]

_SAFE = "[bcdfghjklmnpqrstvwxz2456789]"  # the alphabet of Kubernetes' generated name parts (no vowels)
DEPLOYMENT, STATEFUL, GENERATED = "-[a-z0-9]+-[a-z0-9]+", "-[0-9]+", "-[a-z0-9]+"
_POD_NAMES = (  # (how a controller names its pods, the regex for every pod it ever named)
    (re.compile(rf"^(.+)-{_SAFE}{{5,10}}-{_SAFE}{{5}}$"), DEPLOYMENT),  # Deployment: <d>-<hash>-<rand>
    (re.compile(r"^(.+)-[0-9]+$"), STATEFUL),  # StatefulSet: <s>-<ordinal>
    (re.compile(rf"^(.+)-{_SAFE}{{5}}$"), GENERATED),  # ReplicaSet, DaemonSet, Job: <owner>-<rand>
)
_BY_KIND = {"Deployment": DEPLOYMENT, "StatefulSet": STATEFUL, "ReplicaSet": GENERATED,
            "ReplicationController": GENERATED, "DaemonSet": GENERATED, "Job": GENERATED}


def workload_pattern(pods: Iterable[str]) -> str:
    """A regex (unquoted, anchored by Prometheus) for every pod the controllers of `pods` ever
    named: `web-5d8f7c9b4-x2x7z` -> `web-[a-z0-9]+-[a-z0-9]+` (any ReplicaSet of Deployment
    `web`, not Deployment `web-canary`). A name no controller convention explains stands for itself."""
    out: dict[str, None] = {}
    for pod in sorted(pods):
        for convention, rest in _POD_NAMES:
            m = convention.match(pod)
            if m:
                out[regex_escape(m.group(1)) + rest] = None
                break
        else:
            out[regex_escape(pod)] = None
    return "|".join(out)


def owner_pattern(kind: str, name: str) -> str:
    """The same regex from the controller's kind and name: Deployment `web` ->
    `web-[a-z0-9]+-[a-z0-9]+`. A kind without a known convention (a custom resource): `<name>-.*`."""
    return regex_escape(name) + _BY_KIND.get(kind, "-.*")
