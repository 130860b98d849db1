"""The autoscaler's decision engine: Kubernetes' HPA algorithm as one pure function.

    spec = parse_spec(hpa["spec"])                      # once per spec change
    decision = decide(DecisionInput(spec, ...))         # every sync; no I/O, no clock
    history = decision.history                          # keep for the next sync
    if decision.scale and <scale write succeeded>:
        history = record_scale(history, now, decision.current_replicas, decision.desired_replicas, spec)
"""

from .engine import decide, record_scale, tolerances_for
from .model import (
    Condition,
    ControllerConfig,
    Decision,
    DecisionInput,
    ExternalReading,
    History,
    MetricDetail,
    MetricFailure,
    ObjectReading,
    PodInfo,
    PodReading,
    PodSample,
    Proposal,
    Reading,
    Recommendation,
    ScaleEvent,
)
from .spec import HPASpec, SpecError, admit, parse_spec

__all__ = [
    "Condition",
    "ControllerConfig",
    "Decision",
    "DecisionInput",
    "ExternalReading",
    "HPASpec",
    "History",
    "MetricDetail",
    "MetricFailure",
    "ObjectReading",
    "PodInfo",
    "PodReading",
    "PodSample",
    "Proposal",
    "Reading",
    "Recommendation",
    "ScaleEvent",
    "SpecError",
    "admit",
    "decide",
    "parse_spec",
    "record_scale",
    "tolerances_for",
]
