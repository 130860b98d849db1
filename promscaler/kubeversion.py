"""A Kubernetes release as `major.minor`: what the autoscaler decides as, and what kubesim serves.

Shared by the decision engine (autoscaler.decision.kubeversion: what differs by release) and the
sandbox, so both read `1.36`, `v1.37.1` or a `/version` gitVersion the same way.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["CURRENT", "KubeVersion", "parse_kube_version"]


class KubeVersion(NamedTuple):
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


CURRENT = KubeVersion(1, 37)
"""The release promscaler decides as when nothing names another (offline, or an unreadable /version)."""

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:[.+-].*)?$")


def parse_kube_version(text: str) -> KubeVersion:
    """`1.36`, `v1.37.1`, `v1.37.0-gke.100` (a `/version` gitVersion) -> (major, minor); ValueError otherwise."""
    match = _VERSION.match(text.strip())
    if match is None:
        raise ValueError(f"not a Kubernetes version (want 1.36 or v1.37.0): {text!r}")
    return KubeVersion(int(match.group(1)), int(match.group(2)))
