"""Values an API server accepts but Python's datetime cannot shift (year 1, year 9999, windows of
10^15 s) never crash `decide()`: its time arithmetic saturates as Go's time.Time goes on."""

from __future__ import annotations

from datetime import UTC, datetime

from autoscaler.decision import ControllerConfig, DecisionInput, History, PodReading, PodSample, decide

from .decision_helpers import cpu_util, events, inp, pod, recs, spec

YEAR_1 = datetime(1, 1, 1, tzinfo=UTC)
YEAR_9999 = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)


def test_extreme_times_and_windows_decide():
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 300}}
    for now in (YEAR_1, YEAR_9999):
        pods = [pod("p0", start=YEAR_9999, transition=YEAR_9999), pod("p1", start=YEAR_1, transition=None, ready=False),
                pod("p2", start=YEAR_1, transition=YEAR_1)]
        reading = PodReading({"p0": PodSample(900, YEAR_9999, 1e15), "p1": PodSample(900, YEAR_1, 1e300),
                              "p2": PodSample(900, now, float("nan"))})
        for s in (spec([cpu_util(50)]), spec([cpu_util(50)], behavior=behavior)):
            base = inp(s, 3, pods, [reading], history=History(recs(), events(), events()))
            d = decide(DecisionInput(**{**{f: getattr(base, f) for f in base.__dataclass_fields__}, "now": now,
                                        "config": ControllerConfig(cpu_initialization_period=1e300,
                                                                   initial_readiness_delay=1e300,
                                                                   downscale_stabilization_window=1e300)}))
            assert d.desired_replicas >= 1 and d.explanation
