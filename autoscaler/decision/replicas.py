"""The replica calculator: metrics plus pods -> the replica count one metric asks for.

Semantics of Kubernetes `pkg/controller/podautoscaler/replica_calculator.go` (and
`metrics/utilization.go`): pod grouping, the CPU readiness rules, integer milli-unit arithmetic
with Go's truncating division, the tolerance band, and the conservative recomputation that
treats missing pods as at target (or 0 %) and unready pods as 0 % -- skipped when the direction
would flip or the new ratio lands in tolerance. Errors are `CalcError` with the calculator's words.

Speed (the controller re-decides thousands of autoscalers a second): when the pods' names are
distinct (`names_unique`, once per decision), one pass counts and sums instead of keying values by
pod (`_group_requests`, which also sums the requests, and `_group_plain`); anything unusual --
samples of pods not listed, a pod without the request, a named container -- takes the general
path, which is the reference. The reasons (`Calc.notes`) are formatted only when read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from datetime import UTC, datetime, timedelta

from .model import ControllerConfig, PodInfo, PodSample

__all__ = [
    "CalcError", "Calc", "Tolerances", "group_pods", "pod_requests", "resource_utilization_replicas",
    "plain_metric_replicas", "usage_ratio_replicas", "per_pod_total_replicas", "ready_pod_count",
    "MAX_INT32", "MAX_INT64", "render_notes", "names_unique",
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
    return int(math.ceil(x))


def _ready_condition(pod: PodInfo) -> str | None:
    cond = pod.ready_condition
    if cond == "derive":  # PodInfo resolves this at construction; kept for safety
        return "True" if pod.ready else "False"
    return cond


def _group(
    pods: Sequence[PodInfo],
    samples: Mapping[str, PodSample],
    resource: str,
    config: ControllerConfig,
    now: datetime,
) -> tuple[int, dict[str, int], list[str], list[str], list[str]]:
    """One pass over the pods (`groupPods` + `removeMetricsForPods`): the ready count, the values
    that count (ready pods' samples, plus samples of pods not in the list, as Kubernetes keeps
    them), and the unready, missing and ignored pod names.

    Deleted and Failed pods are ignored; Pending pods are unready for every metric; other
    not-ready pods only count as unready for CPU, judged against start time, the Ready transition
    and the sample's timestamp and window. (A plain loop: CPython 3.11 runs it faster than
    map/zip pipelines over attrgetters.)
    """
    metrics: dict[str, int] = {}
    unready: list[str] = []
    missing: list[str] = []
    ignored: list[str] = []
    get = samples.get
    other = 0  # samples of ignored or unready pods (to spot samples of pods not listed)
    if resource == "cpu":
        init_cutoff = now - config.cpu_initialization_delta
        delay = config.initial_readiness_delta
        windows: dict[float, timedelta] = {}
        for pod in pods:
            name = pod.name
            if not pod.normal:
                (ignored if pod.gone else unready).append(name)
                if name in samples:
                    other += 1
                continue
            sample = get(name)
            if sample is None:
                missing.append(name)
                continue
            if not pod.cpu_simple or pod.start_time > init_cutoff:  # type: ignore[operator]
                cond = pod.ready_condition
                start = pod.start_time
                if cond is None or start is None:
                    unready.append(name)
                    other += 1
                    continue
                if start > init_cutoff:
                    # Still within the CPU initialization period: ignore the sample if the pod is
                    # unready or one full metric window has not passed since the last transition.
                    window = windows.get(sample.window)
                    if window is None:
                        window = windows[sample.window] = timedelta(seconds=sample.window)
                    if cond == "False" or sample.timestamp < (pod.ready_transition or _GO_ZERO_TIME) + window:
                        unready.append(name)
                        other += 1
                        continue
                elif cond == "False" and start + delay > (pod.ready_transition or _GO_ZERO_TIME):
                    # Past it: ignore only pods that are unready and have never been ready.
                    unready.append(name)
                    other += 1
                    continue
            metrics[name] = sample.milli
    else:
        for pod in pods:
            name = pod.name
            if not pod.normal:
                (ignored if pod.gone else unready).append(name)
                if name in samples:
                    other += 1
                continue
            sample = get(name)
            if sample is None:
                missing.append(name)
                continue
            metrics[name] = sample.milli
    ready = len(metrics)
    if ready + other < len(samples):
        listed = {p.name for p in pods}
        for name, sample in samples.items():
            if name not in listed:
                metrics[name] = sample.milli
    return ready, metrics, unready, missing, ignored


def names_unique(pods: Sequence[PodInfo]) -> bool:
    """No two pods share a name: the fast paths below may then count pods instead of keying them."""
    return len({p.name for p in pods}) == len(pods)


def _group_requests(
    pods: Sequence[PodInfo],
    samples: Mapping[str, PodSample],
    resource: str,
    config: ControllerConfig,
    now: datetime,
) -> tuple[int, int, list[str], list[str], list[str], int, dict[str, int]] | None:
    """`_group` fused with `calculateRequests` and the first `_utilization`, for a Utilization
    target without a container and pods with distinct names: the ready count, the sum of their
    values and of their requests, the unready, missing and ignored pods, and the requests of
    those (for the recomputation). None when the general path must decide instead: a pod lacks
    the request or has no containers (its error comes after the "no metrics" one), or samples of
    pods not listed are present. Same decisions as `_group`, line for line."""
    unready: list[str] = []
    missing: list[str] = []
    ignored: list[str] = []
    others: dict[str, int] = {}  # requests of unready, missing and ignored pods
    get = samples.get
    other = 0
    total = 0
    req_total = 0
    try:
        if resource == "cpu":
            init_cutoff = now - config.cpu_initialization_delta
            delay = config.initial_readiness_delta
            windows: dict[float, timedelta] = {}
            for pod in pods:
                sample = get(pod.name)
                # Most pods: Ready, started before the initialization period, with a sample.
                if sample is not None and pod.cpu_since <= init_cutoff:
                    total += sample.milli
                    req_total += pod.cpu_request  # type: ignore[operator]
                    continue
                name = pod.name
                if not pod.normal:
                    others[name] = pod.request_totals[resource]  # type: ignore[index]
                    (ignored if pod.gone else unready).append(name)
                    if name in samples:
                        other += 1
                    continue
                if sample is None:
                    others[name] = pod.request_totals[resource]  # type: ignore[index]
                    missing.append(name)
                    continue
                cond = pod.ready_condition
                start = pod.start_time
                if cond is None or start is None:
                    others[name] = pod.request_totals[resource]  # type: ignore[index]
                    unready.append(name)
                    other += 1
                    continue
                if start > init_cutoff:
                    window = windows.get(sample.window)
                    if window is None:
                        window = windows[sample.window] = timedelta(seconds=sample.window)
                    if cond == "False" or sample.timestamp < (pod.ready_transition or _GO_ZERO_TIME) + window:
                        others[name] = pod.request_totals[resource]  # type: ignore[index]
                        unready.append(name)
                        other += 1
                        continue
                elif cond == "False" and start + delay > (pod.ready_transition or _GO_ZERO_TIME):
                    others[name] = pod.request_totals[resource]  # type: ignore[index]
                    unready.append(name)
                    other += 1
                    continue
                total += sample.milli
                req_total += pod.request_totals[resource]  # type: ignore[index]
        else:
            for pod in pods:
                name = pod.name
                if not pod.normal:
                    others[name] = pod.request_totals[resource]  # type: ignore[index]
                    (ignored if pod.gone else unready).append(name)
                    if name in samples:
                        other += 1
                    continue
                sample = get(name)
                if sample is None:
                    others[name] = pod.request_totals[resource]  # type: ignore[index]
                    missing.append(name)
                    continue
                total += sample.milli
                req_total += pod.request_totals[resource]  # type: ignore[index]
    except (KeyError, TypeError):
        return None
    ready = len(pods) - len(others)
    if ready + other != len(samples):
        return None  # samples of pods not listed
    return ready, total, unready, missing, ignored, req_total, others


def _group_plain(
    pods: Sequence[PodInfo], samples: Mapping[str, PodSample],
) -> tuple[int, int, list[str], list[str], list[str]] | None:
    """`_group` for a metric without the CPU rules and pods with distinct names: the ready count
    and the sum of their values, and the unready, missing and ignored pods. None when samples of
    pods not listed are present (the general path keeps them)."""
    unready: list[str] = []
    missing: list[str] = []
    ignored: list[str] = []
    get = samples.get
    other = 0
    total = 0
    for pod in pods:
        sample = get(pod.name)
        if sample is not None and pod.normal:
            total += sample.milli
            continue
        name = pod.name
        if not pod.normal:
            (ignored if pod.gone else unready).append(name)
            if name in samples:
                other += 1
            continue
        missing.append(name)
    ready = len(pods) - len(unready) - len(missing) - len(ignored)
    if ready + other != len(samples):
        return None
    return ready, total, unready, missing, ignored


def group_pods(
    pods: Sequence[PodInfo],
    samples: Mapping[str, PodSample],
    resource: str,
    config: ControllerConfig,
    now: datetime,
) -> tuple[int, list[str], list[str], list[str]]:
    """Ready count and the unready, missing and ignored pods (Kubernetes' `groupPods`)."""
    ready, _, unready, missing, ignored = _group(pods, samples, resource, config, now)
    return ready, unready, missing, ignored


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
    if not container:
        try:
            return {pod.name: pod.request_totals[resource] for pod in pods}  # type: ignore[index]
        except (KeyError, TypeError):
            pass  # a pod lacks the request (error below) or has no containers (0)
    return {pod.name: _container_requests(pod, container, resource) for pod in pods}


def _utilization(metrics: Mapping[str, int], requests: Mapping[str, int], target: int) -> tuple[float, int, int]:
    """`GetResourceUtilizationRatio`: integer percent of the summed requests, truncated."""
    try:
        req_total = sum(map(requests.__getitem__, metrics))
        total, entries = sum(metrics.values()), len(metrics)
    except KeyError:  # extraneous metrics (no known pod) are left out
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


def render_notes(notes: Sequence[Any]) -> tuple[str, ...]:
    """Format deferred notes (see `Calc.notes`)."""
    return tuple(n if type(n) is str else (n[0].format(*n[1:]) if type(n[0]) is str else n[0](*n[1:]))
                 for n in notes)


def _names(names: list[str]) -> str:
    if len(names) > 5:
        return ", ".join(sorted(names)[:5]) + ", ..."
    return ", ".join(sorted(names))


def _grouping_note(ready: int, unready: list[str], missing: list[str], ignored: list[str]) -> str | None:
    if not (unready or missing or ignored):
        return None
    parts = [f"{ready} ready"]
    if unready:
        parts.append(f"{len(unready)} not yet ready ({_names(unready)})")
    if missing:
        parts.append(f"{len(missing)} without a metric ({_names(missing)})")
    if ignored:
        parts.append(f"{len(ignored)} ignored as deleted or failed ({_names(ignored)})")
    return "pods: " + ", ".join(parts)


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
    unique: bool | None = None,
) -> Calc:
    """`GetResourceReplicas`: a Utilization target (percent of the pods' requests). `unique`:
    whether pod names are distinct (`names_unique`), when the caller knows."""
    if not pods:
        raise CalcError("no pods returned by selector while calculating replica count")
    if unique is None:
        unique = names_unique(pods)
    fast = _group_requests(pods, samples, resource, config, now) if unique and not container else None
    if fast is None:
        return _resource_utilization_general(current, target_utilization, resource, tolerances, pods, samples,
                                             config, now, container)
    ready, total, unready, missing, ignored, req_total, others = fast
    if not ready:
        raise CalcError("did not receive metrics for targeted pods (pods might be unready)")
    if req_total == 0:
        raise CalcError("no metrics returned matched known pods")
    utilization = _div(total * 100, req_total)
    ratio = utilization / target_utilization
    calc = Calc(current, _div(total, ready), ratio, utilization)
    if unready or missing or ignored:
        calc.notes.append((_grouping_note, ready, unready, missing, ignored))
    scale_up_with_unready = bool(unready) and ratio > 1.0
    if not scale_up_with_unready and not missing:
        if tolerances.is_within(ratio):
            calc.notes.append(("ratio {:.3f} is within tolerance {}: keep {}", ratio, tolerances, current))
            return calc
        calc.replicas = _ceil_int32(ratio * ready)
        return calc
    # The recomputation adds the missing (and unready) pods to the sums (`_utilization` again).
    count = ready
    if missing:
        if ratio < 1.0:
            fallback = max(100, target_utilization)
            for name in missing:
                request = others[name]
                total += _div(request * fallback, 100)
                req_total += request
            count += len(missing)
            calc.notes.append(f"scale-down: pods without a metric counted at {fallback}% of their request")
        elif ratio > 1.0:
            for name in missing:
                req_total += others[name]
            count += len(missing)
            calc.notes.append("scale-up: pods without a metric counted at 0%")
    if scale_up_with_unready:
        for name in unready:
            req_total += others[name]
        count += len(unready)
        calc.notes.append("scale-up: not-yet-ready pods counted at 0%")
    if req_total == 0:
        raise CalcError("no metrics returned matched known pods")
    new_util = _div(total * 100, req_total)
    return _finish(calc, current, ratio, new_util / target_utilization, count, tolerances, f"{new_util}% of request")


def _resource_utilization_general(
    current: int,
    target_utilization: int,
    resource: str,
    tolerances: Tolerances,
    pods: Sequence[PodInfo],
    samples: Mapping[str, PodSample],
    config: ControllerConfig,
    now: datetime,
    container: str | None,
) -> Calc:
    """`resource_utilization_replicas` for any input (named containers, pods without requests, ...)."""
    ready, metrics, unready, missing, ignored = _group(pods, samples, resource, config, now)
    if not metrics:
        raise CalcError("did not receive metrics for targeted pods (pods might be unready)")
    requests = pod_requests(pods, container, resource)
    ratio, utilization, raw = _utilization(metrics, requests, target_utilization)
    calc = Calc(current, raw, ratio, utilization)
    if unready or missing or ignored:
        calc.notes.append((_grouping_note, ready, unready, missing, ignored))
    scale_up_with_unready = bool(unready) and ratio > 1.0
    if not scale_up_with_unready and not missing:
        if tolerances.is_within(ratio):
            calc.notes.append(("ratio {:.3f} is within tolerance {}: keep {}", ratio, tolerances, current))
            return calc
        calc.replicas = _ceil_int32(ratio * ready)
        return calc
    if missing:
        if ratio < 1.0:
            fallback = max(100, target_utilization)
            for name in missing:
                metrics[name] = _div(requests[name] * fallback, 100)
            calc.notes.append(f"scale-down: pods without a metric counted at {fallback}% of their request")
        elif ratio > 1.0:
            for name in missing:
                metrics[name] = 0
            calc.notes.append("scale-up: pods without a metric counted at 0%")
    if scale_up_with_unready:
        for name in unready:
            metrics[name] = 0
        calc.notes.append("scale-up: not-yet-ready pods counted at 0%")
    new_ratio, new_util, _ = _utilization(metrics, requests, target_utilization)
    return _finish(calc, current, ratio, new_ratio, len(metrics), tolerances, f"{new_util}% of request")


def _finish(calc: Calc, current: int, ratio: float, new_ratio: float, count: int, tolerances: Tolerances, what: str) -> Calc:
    """The shared tail of the conservative recomputation."""
    calc.notes.append(("recomputed: {}, ratio {:.3f} over {} pods", what, new_ratio, count))
    if tolerances.is_within(new_ratio):
        calc.notes.append(("recomputed ratio is within tolerance {}: keep {}", tolerances, current))
        return calc
    if (ratio < 1.0 and new_ratio > 1.0) or (ratio > 1.0 and new_ratio < 1.0):
        calc.notes.append(f"recomputed ratio would reverse the direction: keep {current}")
        return calc
    replicas = _ceil_int32(new_ratio * count)
    if (new_ratio < 1.0 and replicas > current) or (new_ratio > 1.0 and replicas < current):
        calc.notes.append(f"{replicas} pods would move against the ratio's direction: keep {current}")
        return calc
    calc.replicas = replicas
    return calc


def plain_metric_replicas(
    current: int,
    target_milli: int,
    resource: str,
    tolerances: Tolerances,
    pods: Sequence[PodInfo],
    samples: Mapping[str, PodSample],
    config: ControllerConfig,
    now: datetime,
    unique: bool | None = None,
) -> Calc:
    """`calcPlainMetricReplicas`: an AverageValue target over the pods (Pods metrics, and Resource
    AverageValue where `resource` is the resource name so the CPU readiness rules apply).
    `unique`: whether pod names are distinct (`names_unique`), when the caller knows."""
    if not pods:
        raise CalcError("no pods returned by selector while calculating replica count")
    fast = None
    if resource != "cpu" and (names_unique(pods) if unique is None else unique):
        fast = _group_plain(pods, samples)
    metrics: dict[str, int] | None
    if fast is not None:
        ready, total, unready, missing, ignored = fast
        metrics, count = None, ready  # distinct names, no samples of pods not listed
    else:
        ready, metrics, unready, missing, ignored = _group(pods, samples, resource, config, now)
        total, count = sum(metrics.values()), len(metrics)
    if not count:
        raise CalcError("did not receive metrics for targeted pods (pods might be unready)")
    usage = _div(total, count)
    ratio = usage / target_milli
    calc = Calc(current, usage, ratio)
    if unready or missing or ignored:
        calc.notes.append((_grouping_note, ready, unready, missing, ignored))
    scale_up_with_unready = bool(unready) and ratio > 1.0
    if not scale_up_with_unready and not missing:
        if tolerances.is_within(ratio):
            calc.notes.append(("ratio {:.3f} is within tolerance {}: keep {}", ratio, tolerances, current))
            return calc
        calc.replicas = _ceil_int32(ratio * ready)
        return calc
    # The recomputation (the average again): missing pods at the target or 0, unready pods at 0.
    # With `metrics` (the general path) a name may already be there: keep the total in step.
    if missing:
        if ratio < 1.0:
            if metrics is None:
                total += target_milli * len(missing)
                count += len(missing)
            else:
                for name in missing:
                    total += target_milli - metrics.get(name, 0)
                    metrics[name] = target_milli
            calc.notes.append("scale-down: pods without a metric counted at exactly the target")
        elif ratio > 1.0:
            if metrics is None:
                count += len(missing)
            else:
                for name in missing:
                    total -= metrics.get(name, 0)
                    metrics[name] = 0
            calc.notes.append("scale-up: pods without a metric counted at 0")
    if scale_up_with_unready:
        if metrics is None:
            count += len(unready)
        else:
            for name in unready:
                total -= metrics.get(name, 0)
                metrics[name] = 0
        calc.notes.append("scale-up: not-yet-ready pods counted at 0")
    if metrics is not None:
        count = len(metrics)
    new_usage = _div(total, count)
    new_ratio = new_usage / target_milli
    return _finish(calc, current, ratio, new_ratio, count, tolerances, f"average {new_usage}m")


def ready_pod_count(pods: Sequence[PodInfo]) -> int:
    """Running pods whose Ready condition is True (`getReadyPodsCount`)."""
    if not pods:
        raise CalcError("unable to calculate ready pods: no pods returned by selector while calculating replica count")
    return sum(1 for p in pods if p.phase == "Running" and _ready_condition(p) == "True")


def usage_ratio_replicas(current: int, usage: int, target_milli: int, tolerances: Tolerances, pods: Sequence[PodInfo]) -> Calc:
    """Object Value and External Value (`getUsageRatioReplicaCount`): the ratio times the ready
    pods; from zero replicas, ceil(ratio) with no tolerance so a target can wake up."""
    ratio = usage / target_milli
    calc = Calc(current, usage, ratio)
    if current != 0:
        if tolerances.is_within(ratio):
            calc.notes.append(("ratio {:.3f} is within tolerance {}: keep {}", ratio, tolerances, current))
            return calc
        ready = ready_pod_count(pods)
        calc.replicas = _ceil_int32(ratio * ready)
        calc.notes.append(("{:.3f} x {} ready pods", ratio, ready))
    else:
        calc.replicas = _ceil_int32(ratio)
        calc.notes.append(("from zero replicas: ceil({:.3f})", ratio))
    return calc


def per_pod_total_replicas(status_replicas: int, usage: int, target_milli: int, tolerances: Tolerances) -> Calc:
    """Object and External AverageValue (`Get*PerPodMetricReplicas`): ceil(total / target per pod),
    checked against the tolerance with the target's status.replicas."""
    denominator = target_milli * status_replicas
    if denominator:
        ratio = usage / denominator
    else:
        ratio = math.inf if usage > 0 else math.nan
    replicas = status_replicas
    calc = Calc(replicas, 0, ratio)
    if not tolerances.is_within(ratio):
        replicas = _ceil_int32(usage / target_milli)
    else:
        calc.notes.append(("ratio {:.3f} (with status.replicas {}) is within tolerance {}: keep {}", ratio, status_replicas, tolerances, status_replicas))
    calc.replicas = replicas
    if usage >= MAX_INT64:
        calc.usage = MAX_INT64
    elif status_replicas:
        calc.usage = -(-usage // status_replicas) if usage >= 0 else _div(usage, status_replicas)
    else:
        calc.usage = usage  # Kubernetes divides by zero here; report the total instead
    return calc
