"""Inputs and outputs of one autoscaler decision: plain, immutable values.

This is the seam between the decision engine (pure: no I/O, no clock, no globals) and its two
callers, the live controller and `simulate`. Each caller gathers the world into a
`DecisionInput`; `autoscaler.decision.decide()` turns it into a `Decision`.
Numbers that the Kubernetes controller keeps in milli-units (`int64` MilliValue) are `int` milli here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from .clock import delta
from .kubeversion import CURRENT, Features, KubeVersion, features

# --- the world at one instant ------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PodInfo:
    """What the replica calculator needs of one pod matching the target's selector."""

    name: str
    phase: str = "Running"                     # Pending | Running | Succeeded | Failed | Unknown
    deleted: bool = False                      # metadata.deletionTimestamp is set
    ready: bool = True                         # condition Ready == "True"
    ready_transition: datetime | None = None   # Ready condition's lastTransitionTime
    start_time: datetime | None = None         # status.startTime
    requests: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # container -> resource -> milli
    # Added: the Ready condition's status as written ("True" | "False" | "Unknown"), or None when the pod
    # has no Ready condition. Kubernetes' CPU readiness rule tests `== False` and "no condition" apart
    # from "not ready"; when left at the default, it is derived from `ready`.
    ready_condition: str | None = "derive"
    # Added: pod-level requests (spec.resources.requests, KEP-2837), resource -> milli; None when unset.
    pod_requests: Mapping[str, int] | None = None
    # Derived once here: the pod's requests when no container is named (pod-level if set, else
    # summed over the containers, for the resources every container requests; None: no
    # containers), whether the pod is ignored (deleted or Failed), and whether it is neither
    # ignored nor Pending.
    request_totals: Mapping[str, int] | None = field(init=False, repr=False, compare=False)
    gone: bool = field(init=False, repr=False, compare=False)
    normal: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.ready_condition == "derive":
            object.__setattr__(self, "ready_condition", "True" if self.ready else "False")
        containers = list(self.requests.values())
        totals: dict[str, int] | None = None
        if self.pod_requests:
            totals = dict(self.pod_requests)  # pod-level requests win when no container is named
        elif containers:
            common = set(containers[0]).intersection(*containers[1:])
            totals = {r: sum(c[r] for c in containers) for r in common}
        object.__setattr__(self, "request_totals", totals)
        gone = self.deleted or self.phase == "Failed"
        object.__setattr__(self, "gone", gone)
        object.__setattr__(self, "normal", not gone and self.phase != "Pending")


@dataclass(frozen=True, slots=True)
class PodSample:
    """One pod's reading from metrics.k8s.io (summed over containers, or one container's) or
    custom.metrics.k8s.io."""

    milli: int
    timestamp: datetime
    window: float = 0.0  # seconds


@dataclass(frozen=True, slots=True)
class PodReading:
    """Resource, ContainerResource and Pods metrics: samples by pod name (pods may be missing)."""

    samples: Mapping[str, PodSample]


@dataclass(frozen=True, slots=True)
class ObjectReading:
    """Object metric: the one value of the described object."""

    milli: int
    timestamp: datetime


@dataclass(frozen=True, slots=True)
class ExternalReading:
    """External metric: every matching series' value; the calculator sums them."""

    millis: tuple[int, ...]
    timestamp: datetime


@dataclass(frozen=True, slots=True)
class MetricFailure:
    """The metrics API could not answer for this spec metric."""

    message: str


Reading = PodReading | ObjectReading | ExternalReading | MetricFailure


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """kube-controller-manager's `--horizontal-pod-autoscaler-*` settings, in seconds."""

    tolerance: float = 0.1
    cpu_initialization_period: float = 300.0
    initial_readiness_delay: float = 30.0
    downscale_stabilization_window: float = 300.0
    # The release whose HPA controller this decision follows (autoscaler.decision.kubeversion).
    kube_version: KubeVersion = CURRENT
    # The two CPU periods as timedeltas, and what the release does (its feature gates' defaults),
    # derived once here for the per-sync use.
    cpu_initialization_delta: timedelta = field(init=False, repr=False, compare=False)
    initial_readiness_delta: timedelta = field(init=False, repr=False, compare=False)
    features: Features = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "features", features(self.kube_version))
        object.__setattr__(self, "cpu_initialization_delta", delta(self.cpu_initialization_period))
        object.__setattr__(self, "initial_readiness_delta", delta(self.initial_readiness_delay))


@dataclass(frozen=True, slots=True)
class Recommendation:
    timestamp: datetime
    replicas: int


@dataclass(frozen=True, slots=True)
class ScaleEvent:
    """A replica change made by this autoscaler; `replica_change` is a positive magnitude."""

    timestamp: datetime
    replica_change: int


@dataclass(frozen=True, slots=True)
class History:
    """The controller's memory of one autoscaler. `recommendations=None` means a fresh
    controller (first sync): the engine then seeds it with the current replicas at `now`."""

    recommendations: tuple[Recommendation, ...] | None = None
    scale_up_events: tuple[ScaleEvent, ...] = ()
    scale_down_events: tuple[ScaleEvent, ...] = ()
    # Added (spec.fallback): syncs in a row in which no metric could be read; counted only when the
    # autoscaler has a fallback, so an HPA's history is what it always was.
    failures: int = 0
    # Added (a KEDA ScaledObject's scale to zero, controls.KedaScaling): the last sync at which some
    # trigger was active (KEDA's `status.lastActiveTime`) and the last at which KEDA polled the
    # triggers; None before any.
    last_active: datetime | None = None
    polled: datetime | None = None
    # Added (KedaScaling.initial_cooldown): when the ScaledObject was created, else the first sync
    # (the replay's start); None for anything else.
    created: datetime | None = None


@dataclass(frozen=True, slots=True)
class Pause:
    """The pause annotations: `promscaler.io/paused: "true"` holds the current size (replicas None);
    `promscaler.io/paused-replicas: "N"` scales to N and holds there."""

    replicas: int | None = None


@dataclass(frozen=True, slots=True)
class SelectorOverlap:
    """The autoscalers whose selectors select some of this autoscaler's pods, this one included
    (decision/overlap.py finds them, as the selector store of horizontal.go does); more than one
    stops the autoscaler (ScalingActive False, AmbiguousSelector)."""

    selector: str                    # the scale's status.selector, as the message names it
    autoscalers: tuple[str, ...]     # "namespace/name", sorted


@dataclass(frozen=True, slots=True)
class DecisionInput:
    spec: Any                         # autoscaler.decision.spec.HPASpec, from parse_spec(dict)
    current_replicas: int             # scale subresource spec.replicas
    status_replicas: int              # scale subresource status.replicas (Object/External AverageValue)
    pods: Sequence[PodInfo]           # pods selected by the scale's status.selector
    readings: Sequence[Reading]       # one per spec.metrics entry, in spec order
    now: datetime
    config: ControllerConfig = ControllerConfig()
    history: History = History()
    scaled_to_zero: bool = False      # the autoscaler's ScaledToZero condition was True
    # Added: set when the scale's status.selector is missing or invalid (the pods cannot be chosen);
    # decide() then reports ScalingActive False / InvalidSelector with this message and does not scale.
    selector_error: str | None = None
    # Added: the pause annotations (None: not paused). A paused autoscaler reads no metric.
    paused: Pause | None = None
    # The autoscaler's namespace, as Kubernetes names a failed Object metric's object ("Deployment ns/name").
    namespace: str = "default"
    # A HorizontalPodAutoscaler (False: a HorizontalAutoscaler, which scales to and from zero as
    # promscaler's own feature whatever the release; a native HPA only where HPAScaleToZero is on).
    native: bool = True
    # The autoscalers selecting the same pods (None: not known, as offline); see SelectorOverlap.
    overlap: SelectorOverlap | None = None


# --- the decision ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Proposal:
    type: str                # Resource | ContainerResource | Pods | Object | External
    name: str                # the metric's name
    replicas: int | None     # None when it could not be computed
    error: str | None = None    # as the FailedGet*Metric condition and Event say it
    # as computeReplicasForMetric returns it, wrapped once more ("failed to get pods metric value:
    # ..."): the first error of the FailedComputeMetricsReplicas Event
    wrapped: str | None = None


@dataclass(frozen=True, slots=True)
class Condition:
    type: str                # AbleToScale | ScalingActive | ScalingLimited | ScaledToZero
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class MetricDetail:
    """One spec metric as the calculator saw it, for people: the table row and the adjustments."""

    type: str
    name: str
    target: str                       # e.g. "50% of request", "500m per pod", "30 (total)"
    current: str | None               # raw average as reported in status, or None on error
    ratio: float | None               # usage ratio before readiness/missing adjustments
    replicas: int | None
    error: str | None = None
    notes: tuple[str, ...] = ()       # pod grouping, conservative recomputation, tolerance


@dataclass(frozen=True, slots=True)
class InForce:
    """Which of the opt-in controls (docs/controls.md) shaped a decision, for status, events and
    people. `Decision.controls` is None for an autoscaler without them: an HPA's decision."""

    paused: bool = False
    paused_replicas: int | None = None
    fallback: bool = False               # the fallback count was used this sync
    failures: int = 0                    # syncs in a row with no readable metric (spec.fallback set)
    failing: tuple[str, ...] = ()        # the metrics that could not be read, when all failed
    floor: int | None = None             # the schedule's floor, when a window is open
    window: str | None = None            # the schedule that set the floor
    activation: str | None = None        # "active" | "inactive" when activation from zero decided

    def summary(self) -> str:
        """One word for `kubectl get` (status.control): what is in force, or "" when nothing."""
        if self.paused:
            return "Paused" if self.paused_replicas is None else f"Paused({self.paused_replicas})"
        if self.fallback:
            return "Fallback"
        if self.window is not None:
            return f"Schedule({self.window})"
        return ""


class Lazy:
    """A value computed on its first read, then kept: `Lazy(fn, *args)()` is `fn(*args)`, once."""

    __slots__ = ("args", "fn", "value")

    def __init__(self, fn: Any, *args: Any) -> None:
        self.fn, self.args = fn, args

    def __call__(self) -> Any:
        fn = self.fn
        if fn is not None:
            self.value = fn(*self.args)
            self.fn, self.args = None, ()
        return self.value


@dataclass(frozen=True)
class Decision:
    """One decision. `explanation`, `details` and `steps` are words for people: `decide()` passes
    them as `Lazy` values, formatted on first read (the controller never reads them); given as
    plain values they are kept as they are. Either way they read, compare and print as fields."""

    desired_replicas: int
    current_replicas: int
    recommendation: int | None                 # before stabilization and policies
    current_metrics: list[dict[str, Any]]      # autoscaling/v2 MetricStatus objects
    proposals: list[Proposal]
    conditions: list[Condition]
    explanation: list[str]
    history: History                           # with this decision's recommendation recorded
    details: tuple[MetricDetail, ...] = ()     # added: per-metric reasoning (simulate's table)
    steps: tuple[str, ...] = ()                # added: normalization steps (stabilization, policies, limits)
    # The reason in the controller's SuccessfulRescale event, worded as horizontal.go's rescaleReason
    # ("pods metric http_requests above target", "All metrics below target", ...).
    rescale_reason: str = ""
    controls: InForce | None = None            # added: the opt-in controls in force (None: an HPA's decision)

    @property
    def scale(self) -> bool:
        return self.desired_replicas != self.current_replicas


def _lazy_field(name: str) -> property:
    key = "_" + name

    def get(self: Decision) -> Any:
        value = self.__dict__[key]
        if type(value) is Lazy:
            value = self.__dict__[key] = value()
        return value

    def put(self: Decision, value: Any) -> None:  # only the dataclass __init__ gets here (frozen)
        self.__dict__[key] = value

    return property(get, put, doc=f"Decision.{name}, formatted on first read")


for _name in ("explanation", "details", "steps"):
    setattr(Decision, _name, _lazy_field(_name))
del _name


def make_decision(desired_replicas: int, current_replicas: int, recommendation: int | None,
                  current_metrics: list[dict[str, Any]], proposals: list[Proposal], conditions: list[Condition],
                  explanation: Any, history: History, details: Any, steps: Any, rescale_reason: str = "",
                  controls: InForce | None = None) -> Decision:
    """`Decision(...)` without the frozen dataclass's per-field `object.__setattr__` calls (the
    same instance state; `decide()` makes one per sync)."""
    decision = object.__new__(Decision)
    object.__setattr__(decision, "__dict__", {
        "desired_replicas": desired_replicas, "current_replicas": current_replicas,
        "recommendation": recommendation, "current_metrics": current_metrics, "proposals": proposals,
        "conditions": conditions, "_explanation": explanation, "history": history, "_details": details,
        "_steps": steps, "rescale_reason": rescale_reason, "controls": controls,
    })
    return decision
