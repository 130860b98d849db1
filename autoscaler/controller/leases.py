"""coordination.k8s.io/v1 Lease mechanics shared by leader election (leader.py) and shard
membership (shards.py): where Leases live, client-go's timing rule, how a duration is written
and read back, and how a failed Lease call is reported."""

from __future__ import annotations

import logging
import math
import time

from promscaler.kubeapi import Obj

from .apihealth import ApiHealth, is_outage


def leases_path(namespace: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"


def new_lease(metadata: Obj, spec: Obj) -> Obj:
    """The body that creates a Lease."""
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}


def check_timings(lease_duration: float, renew_deadline: float, retry_period: float) -> None:
    """client-go's rule: a holder gives up (renew deadline) before others may take over (lease
    duration), and retries more than once before it gives up."""
    if not (lease_duration > renew_deadline > retry_period > 0):
        raise ValueError("need lease-duration > renew-deadline > retry-period > 0")


def duration_seconds(lease_duration: float) -> int:
    """`leaseDurationSeconds` is a whole number of seconds: rounded up, so that peers never take
    over before the holder stops acting (its renew deadline is below the duration it was given).
    client-go truncates; with whole-second flags, as Kubernetes components have, both agree."""
    return max(1, math.ceil(lease_duration))


def held_for(spec: Obj, default: float) -> float:
    """How long a Lease's holder may go without renewing (`default` when the record does not say)."""
    return float(spec.get("leaseDurationSeconds") or default)


def past_deadline(renewed_at: float, renew_deadline: float) -> bool:
    """Whether the last successful renewal (monotonic time) is `renew_deadline` or more ago: the
    holder must stop acting as one."""
    return time.monotonic() - renewed_at >= renew_deadline


def report_failure(log: logging.Logger, health: ApiHealth | None, what: str, exc: Exception) -> None:
    """A Lease call that failed without an API answer: an outage is reported once, by the shared
    ApiHealth (here only at debug); anything else is the caller's warning."""
    if health is not None and is_outage(exc):
        health.failed(exc)
        log.debug("%s: %s", what, exc)
    else:
        log.warning("%s: %s", what, exc)
