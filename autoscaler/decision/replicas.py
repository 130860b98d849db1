"""The replica calculator: metrics plus pods -> the replica count one metric asks for.

Semantics of Kubernetes `pkg/controller/podautoscaler/replica_calculator.go` (and
`metrics/utilization.go`): pod grouping, the CPU readiness rules, integer milli-unit arithmetic
with Go's truncating division, the tolerance band, and the conservative recomputation that
treats missing pods as at target (or 0 %) and unready pods as 0 % -- skipped when the direction
would flip or the new ratio lands in tolerance. Errors are `CalcError` with the calculator's words.
One path for every input; the reasons (`Calc.notes`) are formatted only when read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from .clock import before, delta, shift
from .model import ControllerConfig, PodInfo, PodSample

__all__ = [
    "MAX_INT32",
    "MAX_INT64",
    "Calc",
    "CalcError",
    "Grouped",
    "Tolerances",
    "group_pods",
    "per_pod_ratio",
    "per_pod_total_count",
    "per_pod_total_replicas",
    "plain_metric_count",
    "plain_metric_replicas",
    "pod_requests",
    "ratio_count",
    "ready_pod_count",
    "recomputed_count",
    "render_notes",
    "resource_utilization_replicas",
    "usage_ratio_count",
    "usage_ratio_replicas",
]

MAX_INT32 = 2**31 - 1
MAX_INT64 = 2**63 - 1
_GO_ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)


class CalcError(Exception):
    """The calculator could not produce a proposal (the message is Kubernetes')."""


class Tolerances(NamedTuple):
    scale_down: float = 0.1
    scale_up: float = 0.1

    def is_within(self, ratio: float) -> bool:
        # NaN compares false: never "within", as in Go.
        return (1.0 - self.scale_down) <= ratio <= (1.0 + self.scale_up)

    def __str__(self) -> str:
        return f"[down:{self.scale_down * 100:.1f}%, up:{self.scale_up * 100:.1f}%]"


@dataclass(slots=True)
class Calc:
    """One metric's proposal plus what status reports and why."""

    replicas: int
    usage: int                       # milli: raw average (pods), value/total or per-pod average (object/external)
    ratio: float                     # the first usage ratio (before adjustments)
    utilization: int | None = None   # percent of request, Utilization targets only
    # The reasons, formatted only when read (`render_notes`): a str, ("template {}", args...) or
    # (function, args...) each.
    notes: list[Any] = field(default_factory=list)


def _div(a: int, b: int) -> int:
    """Go's int64 division: truncates toward zero."""
    if a >= 0 and b > 0:
        return a // b
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _ceil_int32(x: float) -> int:
    if x != x:  # NaN: Go's conversion is undefined; nothing sane to scale to
        return 0
    if x > MAX_INT32:
        return MAX_INT32
    return math.ceil(x)


# --- groupPods ------------------------------------------------------------------------------------


class Grouped(NamedTuple):
    """`groupPods` + `removeMetricsForPods`: the ready count, the values that count (ready pods'
    samples, plus samples of pods not in the list, as Kubernetes keeps them), and the unready,
    missing and ignored pod names."""

    ready: int
    metrics: dict[str, int]
    unready: list[str]
    missing: list[str]
    ignored: list[str]


def _cpu_unready(pod: PodInfo, sample: PodSample, init_cutoff: datetime, delay: timedelta) -> bool:
    """The CPU readiness rule for a Running pod with a sample."""
    cond, start = pod.ready_condition, pod.start_time
    if cond is None or start is None:
        return True
    if start <= init_cutoff:
        # Past the CPU initialization period: ignore only pods that are unready and have never been ready.
        return cond == "False" and shift(start, delay) > (pod.ready_transition or _GO_ZERO_TIME)
    # Still within it: ignore the sample if the pod is unready or one full metric window has not
    # passed since the last transition.
    transition = pod.ready_transition or _GO_ZERO_TIME
    return cond == "False" or sample.timestamp < shift(transition, delta(sample.window))


def group_pods(pods: Sequence[PodInfo], samples: Mapping[str, PodSample], resource: str,
               config: ControllerConfig, now: datetime) -> Grouped:
    """Deleted and Failed pods are ignored; Pending pods are unready for every metric; other
    not-ready pods only count as unready for CPU, judged against start time, the Ready
    transition and the sample's timestamp and window."""
    metrics: dict[str, int] = {}
    unready: list[str] = []
    missing: list[str] = []
    ignored: list[str] = []
    cpu = resource == "cpu"
    init_cutoff = before(now, config.cpu_initialization_delta)
    delay = config.initial_readiness_delta
    set_aside = 0  # samples of unready and ignored pods
    for pod in pods:
        name = pod.name
        sample = samples.get(name)
        if not pod.normal:
            (ignored if pod.gone else unready).append(name)
            set_aside += sample is not None
        elif sample is None:
            missing.append(name)
        elif cpu and _cpu_unready(pod, sample, init_cutoff, delay):
            unready.append(name)
            set_aside += 1
        else:
            metrics[name] = sample.milli
    ready = len(metrics)
    if len(samples) > ready + set_aside:  # samples of pods not listed stay, as in Kubernetes
        listed = {p.name for p in pods}
        metrics.update((name, s.milli) for name, s in samples.items() if name not in listed)
    return Grouped(ready, metrics, unready, missing, ignored)


def _names(names: list[str]) -> str:
    if len(names) > 5:
        return ", ".join(sorted(names)[:5]) + ", ..."
    return ", ".join(sorted(names))


def _grouping_note(g: Grouped) -> str:
    parts = [f"{g.ready} ready"]
    if g.unready:
        parts.append(f"{len(g.unready)} not yet ready ({_names(g.unready)})")
    if g.missing:
        parts.append(f"{len(g.missing)} without a metric ({_names(g.missing)})")
    if g.ignored:
        parts.append(f"{len(g.ignored)} ignored as deleted or failed ({_names(g.ignored)})")
    return "pods: " + ", ".join(parts)


def _first_calc(current: int, usage: int, ratio: float, g: Grouped, utilization: int | None = None) -> Calc:
    calc = Calc(current, usage, ratio, utilization)
    if g.unready or g.missing or g.ignored:
        calc.notes.append((_grouping_note, g))
    return calc


_WITHIN = "ratio {:.3f} is within tolerance {}: keep {}"


def _needs_recompute(ratio: float, unready: int, missing: int) -> bool:
    """Missing pods, or a scale-up with unready pods: the first ratio cannot decide alone."""
    return (unready > 0 and ratio > 1.0) or missing > 0


def ratio_count(current: int, ratio: float, pods: int, tolerances: Tolerances,
                   notes: list[Any] | None = None) -> int:
    """A ratio within tolerance keeps `current`; else ceil(ratio x pods). The reason goes to
    `notes` when given (the engine's explain), so the replay's fast path allocates nothing."""
    if tolerances.is_within(ratio):
        if notes is not None:
            notes.append((_WITHIN, ratio, tolerances, current))
        return current
    return _ceil_int32(ratio * pods)


def recomputed_count(current: int, ratio: float, new_ratio: float, count: int, tolerances: Tolerances,
                        notes: list[Any] | None = None) -> int:
    """The conservative recomputation's verdict over `count` pods: `current` when the new ratio is
    within tolerance, reverses the first ratio's direction, or its count moves against it."""
    if tolerances.is_within(new_ratio):
        if notes is not None:
            notes.append(("recomputed ratio is within tolerance {}: keep {}", tolerances, current))
        return current
    if (ratio < 1.0 and new_ratio > 1.0) or (ratio > 1.0 and new_ratio < 1.0):
        if notes is not None:
            notes.append(f"recomputed ratio would reverse the direction: keep {current}")
        return current
    replicas = _ceil_int32(new_ratio * count)
    if (new_ratio < 1.0 and replicas > current) or (new_ratio > 1.0 and replicas < current):
        if notes is not None:
            notes.append(f"{replicas} pods would move against the ratio's direction: keep {current}")
        return current
    return replicas


# --- Utilization targets ----------------------------------------------------------------------------


def _container_requests(pod: PodInfo, container: str | None, resource: str) -> int:
    if not container and pod.pod_requests:
        if resource not in pod.pod_requests:
            raise CalcError(f"missing pod-level request for {resource} in Pod {pod.name}")
        return pod.pod_requests[resource]
    total = 0
    for cname, reqs in pod.requests.items():
        if not container or container == cname:
            value = reqs.get(resource)
            if value is None:
                raise CalcError(f"missing request for {resource} in container {cname} of Pod {pod.name}")
            total += value
        if container == cname:
            return total
    if container:
        raise CalcError(f"container {container} not found in Pod {pod.name}")
    return total


def pod_requests(pods: Sequence[PodInfo], container: str | None, resource: str) -> dict[str, int]:
    """Requests per pod (`calculateRequests`): pod-level when set and no container is named, else
    the containers' sum (or the named container's)."""
    requests: dict[str, int] = {}
    for pod in pods:
        totals = None if container else pod.request_totals
        if totals is not None and resource in totals:
            requests[pod.name] = totals[resource]  # summed once, in PodInfo
        else:
            requests[pod.name] = _container_requests(pod, container, resource)
    return requests


def _utilization(metrics: Mapping[str, int], requests: Mapping[str, int], target: int) -> tuple[float, int, int]:
    """`GetResourceUtilizationRatio`: integer percent of the summed requests, truncated; metrics
    of pods without a known request are extraneous and left out."""
    total = req_total = entries = 0
    for name, value in metrics.items():
        request = requests.get(name)
        if request is not None:
            total += value
            req_total += request
            entries += 1
    if req_total == 0:
        raise CalcError("no metrics returned matched known pods")
    utilization = _div(total * 100, req_total)
    return utilization / target, utilization, _div(total, entries)


def resource_utilization_replicas(
    current: int,
    target_utilization: int,
    resource: str,
    tolerances: Tolerances,
    pods: Sequence[PodInfo],
    samples: Mapping[str, PodSample],
    config: ControllerConfig,
    now: datetime,
    container: str | None = None,
) -> Calc:
    """`GetResourceReplicas`: a Utilization target (percent of the pods' requests)."""
    if not pods:
        raise CalcError("no pods returned by selector while calculating replica count")
    g = group_pods(pods, samples, resource, config, now)
    if not g.metrics:
        raise CalcError("did not receive metrics for targeted pods (pods might be unready)")
    requests = pod_requests(pods, container, resource)
    ratio, utilization, raw = _utilization(g.metrics, requests, target_utilization)
    calc = _first_calc(current, raw, ratio, g, utilization)
    if not _needs_recompute(ratio, len(g.unready), len(g.missing)):
        calc.replicas = ratio_count(current, ratio, g.ready, tolerances, calc.notes)
        return calc
    metrics = g.metrics
    if g.missing and ratio < 1.0:
        fallback = max(100, target_utilization)
        for name in g.missing:
            metrics[name] = _div(requests[name] * fallback, 100)
        calc.notes.append(f"scale-down: pods without a metric counted at {fallback}% of their request")
    elif g.missing and ratio > 1.0:
        metrics.update(dict.fromkeys(g.missing, 0))
        calc.notes.append("scale-up: pods without a metric counted at 0%")
    if g.unready and ratio > 1.0:
        metrics.update(dict.fromkeys(g.unready, 0))
        calc.notes.append("scale-up: not-yet-ready pods counted at 0%")
    new_ratio, new_util, _ = _utilization(metrics, requests, target_utilization)
    calc.notes.append(("recomputed: {}% of request, ratio {:.3f} over {} pods", new_util, new_ratio, len(metrics)))
    calc.replicas = recomputed_count(current, ratio, new_ratio, len(metrics), tolerances, calc.notes)
    return calc


# --- AverageValue targets over the pods -------------------------------------------------------------


def plain_metric_replicas(
    current: int,
    target_milli: int,
    resource: str,
    tolerances: Tolerances,
    pods: Sequence[PodInfo],
    samples: Mapping[str, PodSample],
    config: ControllerConfig,
    now: datetime,
) -> Calc:
    """`calcPlainMetricReplicas`: an AverageValue target over the pods (Pods metrics, and Resource
    AverageValue where `resource` is the resource name so the CPU readiness rules apply)."""
    if not pods:
        raise CalcError("no pods returned by selector while calculating replica count")
    g = group_pods(pods, samples, resource, config, now)
    metrics = g.metrics
    if not metrics:
        raise CalcError("did not receive metrics for targeted pods (pods might be unready)")
    total, count = sum(metrics.values()), len(metrics)
    usage = _div(total, count)
    calc = _first_calc(current, usage, usage / target_milli, g)
    calc.replicas = plain_metric_count(current, total, count, target_milli, g.ready, len(g.unready), len(g.missing),
                                   tolerances, calc.notes)
    return calc


def plain_metric_count(current: int, total: int, count: int, target_milli: int, ready: int, unready: int, missing: int,
                   tolerances: Tolerances, notes: list[Any] | None = None) -> int:
    """`calcPlainMetricReplicas`' arithmetic on counts: `total` milli over the `count` samples that
    count (the average, truncated), `ready` pods to scale by; the recomputation averages again with
    the `missing` pods at the target (scale-down) or 0 (scale-up) and the `unready` pods at 0
    (scale-up). Counts stand for the engine's pod names: a namespace's pod names are unique."""
    ratio = _div(total, count) / target_milli
    if not _needs_recompute(ratio, unready, missing):
        return ratio_count(current, ratio, ready, tolerances, notes)
    if missing and ratio < 1.0:
        total, count = total + missing * target_milli, count + missing
        if notes is not None:
            notes.append("scale-down: pods without a metric counted at exactly the target")
    elif missing and ratio > 1.0:
        count += missing
        if notes is not None:
            notes.append("scale-up: pods without a metric counted at 0")
    if unready and ratio > 1.0:
        count += unready
        if notes is not None:
            notes.append("scale-up: not-yet-ready pods counted at 0")
    new_usage = _div(total, count)
    new_ratio = new_usage / target_milli
    if notes is not None:
        notes.append(("recomputed: average {}m, ratio {:.3f} over {} pods", new_usage, new_ratio, count))
    return recomputed_count(current, ratio, new_ratio, count, tolerances, notes)


def render_notes(notes: Sequence[Any]) -> tuple[str, ...]:
    """Format deferred notes (see `Calc.notes`)."""
    return tuple(_render(n) for n in notes)


def _render(note: Any) -> str:
    if isinstance(note, str):
        return note
    head, *args = note
    return head.format(*args) if isinstance(head, str) else str(head(*args))


# --- Object and External targets ----------------------------------------------------------------------


_NO_PODS_FOR_READY = "unable to calculate ready pods: no pods returned by selector while calculating replica count"


def ready_pod_count(pods: Sequence[PodInfo]) -> int:
    """Running pods whose Ready condition is True (`getReadyPodsCount`)."""
    if not pods:
        raise CalcError(_NO_PODS_FOR_READY)
    return sum(1 for p in pods if p.phase == "Running" and p.ready_condition == "True")


def usage_ratio_replicas(current: int, usage: int, target_milli: int, tolerances: Tolerances,
                         pods: Sequence[PodInfo]) -> Calc:
    """Object Value and External Value (`getUsageRatioReplicaCount`) on the target's pods."""
    calc = Calc(current, usage, usage / target_milli)
    replicas = usage_ratio_count(current, usage, target_milli, ready_pod_count(pods) if pods else None, tolerances,
                                 calc.notes)
    if replicas is None:
        raise CalcError(_NO_PODS_FOR_READY)
    calc.replicas = replicas
    return calc


def usage_ratio_count(current: int, usage: int, target_milli: int, ready: int | None, tolerances: Tolerances,
                      notes: list[Any] | None = None) -> int | None:
    """`getUsageRatioReplicaCount`'s arithmetic: the ratio times the `ready` pods; from zero
    replicas, ceil(ratio) with no tolerance so a target can wake up. `ready` is None when the
    selector found no pods, which fails (None) only once the count is needed, as in Kubernetes."""
    ratio = usage / target_milli
    if current == 0:
        if notes is not None:
            notes.append(("from zero replicas: ceil({:.3f})", ratio))
        return _ceil_int32(ratio)
    if tolerances.is_within(ratio):
        if notes is not None:
            notes.append((_WITHIN, ratio, tolerances, current))
        return current
    if ready is None:
        return None
    if notes is not None:
        notes.append(("{:.3f} x {} ready pods", ratio, ready))
    return _ceil_int32(ratio * ready)


def per_pod_total_replicas(status_replicas: int, usage: int, target_milli: int, tolerances: Tolerances) -> Calc:
    """Object and External AverageValue (`Get*PerPodMetricReplicas`): the proposal, and the
    average per status replica that status reports."""
    calc = Calc(status_replicas, 0, per_pod_ratio(status_replicas, usage, target_milli))
    calc.replicas = per_pod_total_count(status_replicas, usage, target_milli, tolerances, calc.notes)
    if usage >= MAX_INT64:
        calc.usage = MAX_INT64
    elif status_replicas:
        calc.usage = -(-usage // status_replicas) if usage >= 0 else _div(usage, status_replicas)
    else:
        calc.usage = usage  # Kubernetes divides by zero here; report the total instead
    return calc


def per_pod_ratio(status_replicas: int, usage: int, target_milli: int) -> float:
    """The total over (target per pod x status.replicas); with no replicas, +Inf for a positive
    total and NaN for none (never within tolerance)."""
    denominator = target_milli * status_replicas
    return usage / denominator if denominator else math.inf if usage > 0 else math.nan


def per_pod_total_count(status_replicas: int, usage: int, target_milli: int, tolerances: Tolerances,
                        notes: list[Any] | None = None) -> int:
    """`Get*PerPodMetricReplicas`' arithmetic: ceil(total / target per pod), unless the ratio
    against the target's status.replicas is within tolerance (keep status.replicas)."""
    ratio = per_pod_ratio(status_replicas, usage, target_milli)
    if tolerances.is_within(ratio):
        if notes is not None:
            notes.append(("ratio {:.3f} (with status.replicas {}) is within tolerance {}: keep {}",
                          ratio, status_replicas, tolerances, status_replicas))
        return status_replicas
    return _ceil_int32(usage / target_milli)
