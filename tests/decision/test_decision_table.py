"""Table tests for the decision engine, one case per branch of Kubernetes' HPA algorithm.

Each case says in its comment why Kubernetes (replica_calculator.go, horizontal.go) arrives at
the expected number; several numbers are those of Kubernetes' own replica_calculator_test.go.
Defaults unless said otherwise: pods started an hour ago and Ready since then, 1 CPU (1000m)
request each, samples 15 s old with a 30 s window, tolerance 0.1, explicit empty history.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from autoscaler.decision import ControllerConfig, DecisionInput, History, PodInfo, decide

from .decision_helpers import (
    ago,
    container_cpu,
    cpu_util,
    cpu_value,
    events,
    ext_avg,
    ext_value,
    external,
    failure,
    inp,
    mem_util,
    obj,
    object_avg,
    object_value,
    pod,
    pods,
    pods_metric,
    recs,
    samples,
    spec,
    want,
)

SKIP: Any = object()


@dataclass
class Case:
    id: str
    input: DecisionInput
    proposal: Any = SKIP                     # proposals[0].replicas
    error: str | None = None                 # substring of proposals[0].error
    desired: Any = SKIP
    recommendation: Any = SKIP
    conds: dict[str, str] = field(default_factory=dict)   # type -> reason
    current: dict[str, Any] | None = None    # subset of currentMetrics[0]'s "current"
    status: dict[str, str] = field(default_factory=dict)  # type -> "True"/"False"


def _unready_new(name: str, **kw: Any) -> PodInfo:
    """A pod started 60 s ago (inside the 300 s CPU initialization period), not Ready yet."""
    return pod(name, ready=False, start=ago(60), transition=ago(60), **kw)


def _beh_inp(behavior: dict, current: int, wanted: int, history: History | None = None, min_r: int = 1,
             max_r: int = 100, config: ControllerConfig | None = None) -> DecisionInput:
    metric, reading = want(wanted, current)
    return inp(spec([metric], min_r=min_r, max_r=max_r, behavior=behavior), current, [], [reading],
               history=history, config=config)


def _legacy_inp(current: int, wanted: int, history: History | None = None, min_r: int = 1, max_r: int = 100,
                config: ControllerConfig | None = None) -> DecisionInput:
    metric, reading = want(wanted, current)
    return inp(spec([metric], min_r=min_r, max_r=max_r), current, [], [reading], history=history, config=config)


def _podinfo_with_pod_level(name: str) -> PodInfo:
    p = pod(name, cpu=1000)
    return PodInfo(p.name, p.phase, p.deleted, p.ready, p.ready_transition, p.start_time, p.requests,
                   p.ready_condition, {"cpu": 2000})


DOWN0 = {"scaleDown": {"stabilizationWindowSeconds": 0}}

CASES: list[Case] = [
    # ---------------- Resource metrics, Utilization target ---------------------------------------
    # Kubernetes TestReplicaCalcScaleUp: 300+500+700 of 3000m requested = 50% vs 30% target,
    # ratio 1.667, ceil(1.667 x 3) = 5; status: 50% and the raw average 500m.
    Case("cpu-scale-up", inp(spec([cpu_util(30)]), 3, pods(3), [samples([300, 500, 700])]),
         proposal=5, current={"averageUtilization": 50, "averageValue": "500m"}),
    # TestReplicaCalcScaleDown: 1400m of 5000m = 28% vs 50%, ratio 0.56, ceil(0.56 x 5) = 3.
    Case("cpu-scale-down", inp(spec([cpu_util(50)]), 5, pods(5), [samples([100, 300, 500, 250, 250])]),
         proposal=3, current={"averageUtilization": 28, "averageValue": "280m"}),
    # 3100m of 3000m = 103% vs 100%: ratio 1.03 is inside the 10% tolerance: keep 3.
    Case("cpu-within-tolerance", inp(spec([cpu_util(100)]), 3, pods(3), [samples([1050, 1050, 1000])]),
         proposal=3, current={"averageUtilization": 103}),
    # 999m of 3000m is 33.3%, truncated to 33 (integer percent); 33/30 = 1.1 exactly is still within
    # tolerance, so 3 -- without Kubernetes' truncation it would be 1.11 and 4.
    Case("cpu-utilization-truncates", inp(spec([cpu_util(30)]), 3, pods(3), [samples([333, 333, 333])]),
         proposal=3, current={"averageUtilization": 33, "averageValue": "333m"}),
    # Raw average 301/3 truncates to 100m; 301*100/3000 = 10%; ratio 0.2, ceil(0.6) = 1.
    Case("cpu-raw-average-truncates", inp(spec([cpu_util(50)]), 3, pods(3), [samples([100, 100, 101])]),
         proposal=1, current={"averageUtilization": 10, "averageValue": "100m"}),
    # The shared example: p2 started 60 s ago and is not Ready (inside the CPU initialization period):
    # set aside. Ready pods: 3000m/2000m = 150% vs 50% -> ratio 3 -> scale-up with unready pods:
    # p2 counts as 0%: 3000/3000 = 100% -> ratio 2 -> ceil(2 x 3) = 6. Status keeps the raw 150%.
    Case("cpu-unready-scale-up", inp(spec([cpu_util(50)]), 3, [pod("p0"), pod("p1"), _unready_new("p2")],
                                     [samples([1500, 1500, 100])]),
         proposal=6, current={"averageUtilization": 150, "averageValue": "1500m"}),
    # TestReplicaCalcScaleUpUnreadyNoScale: only p0 (400m) is ready: 40% vs 30% -> 1.33; counting the
    # two unready pods at 0%: 400/3000 = 13% -> 0.43 would reverse the direction: keep 3.
    Case("cpu-unready-direction-flip", inp(spec([cpu_util(30)]), 3, [pod("p0"), _unready_new("p1"), _unready_new("p2")],
                                           [samples([400, 500, 700])]),
         proposal=3, current={"averageUtilization": 40}),
    # TestReplicaCalcScaleUpUnreadyLessScale: ready 500+700 = 60% -> ratio 2; p0 at 0%:
    # 1200/3000 = 40% -> 1.33 -> ceil(1.33 x 3) = 4 (not ceil(2 x 3) = 6 as if p0 were as busy).
    Case("cpu-unready-less-scale", inp(spec([cpu_util(30)]), 3, [_unready_new("p0"), pod("p1"), pod("p2")],
                                       [samples([300, 500, 700])]),
         proposal=4, current={"averageUtilization": 60, "averageValue": "600m"}),
    # Scale-down with an unready pod: no rebalancing (ratio < 1), its sample is just dropped:
    # 200/2000 = 10% vs 50% -> 0.2 -> ceil(0.2 x 2 ready) = 1.
    Case("cpu-unready-dropped-on-scale-down", inp(spec([cpu_util(50)]), 3, [_unready_new("p0"), pod("p1"), pod("p2")],
                                                  [samples([900, 100, 100])]),
         proposal=1, current={"averageUtilization": 10}),
    # A Pending pod is unready for every metric: 1800/2000 = 90% vs 50% -> 1.8; Pending counted at 0%:
    # 1800/3000 = 60% -> 1.2 -> ceil(3.6) = 4.
    Case("cpu-pending-pod-rebalanced", inp(spec([cpu_util(50)]), 3, [pod("p0"), pod("p1"), pod("p2", phase="Pending")],
                                           [samples({"p0": 900, "p1": 900})]),
         proposal=4),
    # TestReplicaCalcScaleUpIgnoresFailedPods: failed pods and their samples are ignored entirely:
    # 1200/2000 = 60% vs 30% -> 2 -> ceil(2 x 2) = 4.
    Case("cpu-failed-pods-ignored", inp(spec([cpu_util(30)]), 2,
                                        [pod("p0"), pod("p1"), pod("p2", phase="Failed"), pod("p3", phase="Failed")],
                                        [samples([500, 700, 3000, 3000])]),
         proposal=4, current={"averageUtilization": 60, "averageValue": "600m"}),
    # TestReplicaCalcScaleUpIgnoresDeletionPods: pods being deleted are ignored the same way.
    Case("cpu-deleted-pods-ignored", inp(spec([cpu_util(30)]), 2,
                                         [pod("p0"), pod("p1"), pod("p2", deleted=True), pod("p3", deleted=True)],
                                         [samples([500, 700, 3000, 3000])]),
         proposal=4, current={"averageUtilization": 60}),
    # Missing metric on a scale-up counts as 0%: 2700/3000 = 90% -> 1.8; with p3 at 0:
    # 2700/4000 = 67% -> 1.34 -> ceil(1.34 x 4) = 6.
    Case("cpu-missing-scale-up", inp(spec([cpu_util(50)]), 4, pods(4), [samples([900, 900, 900])]),
         proposal=6, current={"averageUtilization": 90}),
    # Missing metric on a scale-down counts as 100% of its request: 300/3000 = 10% -> 0.2;
    # with p3 at 1000m: 1300/4000 = 32% -> 0.64 -> ceil(2.56) = 3.
    Case("cpu-missing-scale-down", inp(spec([cpu_util(50)]), 4, pods(4), [samples([100, 100, 100])]),
         proposal=3, current={"averageUtilization": 10}),
    # The max(100, target) rule: with a 150% target a missing pod counts at 150% of its request:
    # 300/3000 = 10% -> 0.067; (300+1500)/4000 = 45% -> 0.3 -> ceil(1.2) = 2 (100% would give 1).
    Case("cpu-missing-scale-down-target-over-100", inp(spec([cpu_util(150)]), 4, pods(4), [samples([100, 100, 100])]),
         proposal=2),
    # Missing pods make the recomputed ratio cross 1: 495/2000 = 24% -> 0.48, then (495+2000)/4000
    # = 62% -> 1.24: the direction would flip: keep 4.
    Case("cpu-missing-direction-flip", inp(spec([cpu_util(50)]), 4, pods(4), [samples([400, 95])]),
         proposal=4),
    # 900/3000 = 30% -> 0.6; with the missing pod at 100%: 1900/4000 = 47% -> 0.94: within tolerance.
    Case("cpu-missing-lands-in-tolerance", inp(spec([cpu_util(50)]), 4, pods(4), [samples([300, 300, 300])]),
         proposal=4),
    # Current 2 but 4 pods (rollout): 0.2 -> recomputed 0.64 -> ceil(0.64 x 4) = 3 > 2 although the
    # ratio says "down": the pod count would reverse the direction: keep 2.
    Case("cpu-missing-count-would-scale-up", inp(spec([cpu_util(50)]), 2, pods(4), [samples([100, 100, 100])]),
         proposal=2),
    # No pods selected at all: "no pods returned by selector".
    Case("cpu-no-pods", inp(spec([cpu_util(50)]), 3, [], [samples([100])]),
         proposal=None, error="no pods returned by selector while calculating replica count"),
    # Every pod is unready: nothing left to average.
    Case("cpu-all-unready",
         inp(spec([cpu_util(50)]), 2, [_unready_new("p0"), _unready_new("p1")], [samples([100, 100])]),
         proposal=None, error="did not receive metrics for targeted pods"),
    # Utilization without a request is an error, never a guess.
    Case("cpu-missing-request", inp(spec([cpu_util(50)]), 2, [pod("p0", cpu=None), pod("p1")], [samples([100, 100])]),
         proposal=None, error="missing request for cpu in container app of Pod p0"),
    # All requests are 0: the total is 0 and no utilization can be formed.
    Case("cpu-zero-requests", inp(spec([cpu_util(50)]), 2, pods(2, cpu=0), [samples([100, 100])]),
         proposal=None, error="no metrics returned matched known pods"),
    # Ready pod inside the initialization period whose sample started before the Ready transition
    # plus one window (-15 s < -20 s + 30 s): set aside. 3000/2000 -> 3; p2 at 0: 2 -> 6.
    Case("cpu-sample-before-transition-window", inp(spec([cpu_util(50)]), 3,
                                                    [pod("p0"), pod("p1"),
                                                     pod("p2", start=ago(60), transition=ago(20))],
                                                    [samples([1500, 1500, 1500])]),
         proposal=6),
    # Same pod Ready 60 s ago: a full window passed since (-15 > -60 + 30): the sample counts: 9.
    Case("cpu-sample-after-transition-window", inp(spec([cpu_util(50)]), 3,
                                                   [pod("p0"), pod("p1"), pod("p2", start=ago(60), transition=ago(60))],
                                                   [samples([1500, 1500, 1500])]),
         proposal=9),
    # Past the initialization period, not Ready and never ready (transition within 30 s of start):
    # set aside: ready 3000/2000 -> 3; p2 at 0%: ratio 2 -> 6.
    Case("cpu-never-ready-after-init", inp(spec([cpu_util(50)]), 3,
                                           [pod("p0"), pod("p1"),
                                            pod("p2", ready=False, start=ago(400), transition=ago(390))],
                                           [samples([1500, 1500, 100])]),
         proposal=6),
    # Past the initialization period, not Ready but it was ready before (transition long after start):
    # counted: 3100/3000 = 103% vs 50% -> 2.06 -> ceil(6.2) = 7.
    Case("cpu-was-ready-after-init", inp(spec([cpu_util(50)]), 3,
                                         [pod("p0"), pod("p1"),
                                          pod("p2", ready=False, start=ago(400), transition=ago(100))],
                                         [samples([1500, 1500, 100])]),
         proposal=7),
    # No Ready condition at all: unready for CPU -> like the unready case: 6.
    Case("cpu-no-ready-condition", inp(spec([cpu_util(50)]), 3, [pod("p0"), pod("p1"), pod("p2", ready=None)],
                                       [samples([1500, 1500, 1500])]),
         proposal=6),
    # Memory has no readiness rule: the not-ready pod counts: 4500/3000 = 150% vs 50% -> 3 -> 9.
    Case("memory-ignores-readiness", inp(spec([mem_util(50)]), 3,
                                         [pod("p0", mem=1000), pod("p1", mem=1000), _unready_new("p2", mem=1000)],
                                         [samples([1500, 1500, 1500])]),
         proposal=9, current={"averageUtilization": 150, "averageValue": "1500m"}),
    # CPU AverageValue (GetRawResourceReplicas): average 1000m vs 500m -> 2 -> ceil(6) = 6.
    Case("cpu-average-value", inp(spec([cpu_value("500m")]), 3, pods(3), [samples([900, 1000, 1100])]),
         proposal=6, current={"averageValue": "1"}),
    # CPU AverageValue still applies CPU readiness: ready average 1000 -> 2; p2 at 0: 2000/3 = 666m
    # -> 1.332 -> ceil(3.996) = 4.
    Case("cpu-average-value-unready", inp(spec([cpu_value("500m")]), 3, [pod("p0"), pod("p1"), _unready_new("p2")],
                                          [samples([1000, 1000, 1000])]),
         proposal=4),
    # CPU AverageValue missing on scale-down counts at exactly the target: 100 -> 0.2; (100+100+500)/3
    # = 233m -> 0.466 -> ceil(1.4) = 2.
    Case("cpu-average-value-missing-down", inp(spec([cpu_value("500m")]), 3, pods(3), [samples([100, 100])]),
         proposal=2),
    # ContainerResource divides by the named container's request only: 1500/1500 = 100% vs 50% -> 6.
    Case("container-resource", inp(spec([container_cpu(50)]), 3,
                                   pods(3, containers={"app": {"cpu": 500}, "sidecar": {"cpu": 500}}),
                                   [samples([500, 500, 500])]),
         proposal=6, current={"averageUtilization": 100}),
    # The same numbers as a Resource metric sum both containers' requests: 1500/3000 = 50%: keep 3.
    Case("resource-sums-containers", inp(spec([cpu_util(50)]), 3,
                                         pods(3, containers={"app": {"cpu": 500}, "sidecar": {"cpu": 500}}),
                                         [samples([500, 500, 500])]),
         proposal=3, current={"averageUtilization": 50}),
    # ContainerResource naming a container the pod does not have: an error.
    Case("container-not-found", inp(spec([container_cpu(50, "web")]), 2, pods(2), [samples([500, 500])]),
         proposal=None, error="container web not found in Pod p0"),
    # Pod-level requests (2 CPU) win over the container's 1 CPU: 6000/6000 = 100% vs 50% -> 6 (not 12).
    Case("pod-level-requests", inp(spec([cpu_util(50)]), 3, [_podinfo_with_pod_level(f"p{i}") for i in range(3)],
                                   [samples([2000, 2000, 2000])]),
         proposal=6, current={"averageUtilization": 100}),
    # A sample for a pod that is not selected has no request: left out of the utilization:
    # 2000/2000 = 100% vs 50% -> ceil(2 x 2) = 4.
    Case("cpu-extraneous-sample",
         inp(spec([cpu_util(50)]), 2, pods(2), [samples({"p0": 1000, "p1": 1000, "px": 9000})]),
         proposal=4),

    # ---------------- Pods metrics (AverageValue) --------------------------------------------------
    # TestReplicaCalcScaleUpCM: average 20 vs 15 -> 1.33 -> ceil(4) = 4; status the average 20.
    Case("pods-scale-up", inp(spec([pods_metric("15")]), 3, pods(3), [samples([20000, 10000, 30000])]),
         proposal=4, current={"averageValue": "20"}),
    # TestReplicaCalcToleranceCM: average 20.666 vs 20 -> 1.033: within tolerance.
    Case("pods-within-tolerance", inp(spec([pods_metric("20")]), 3, pods(3), [samples([20000, 21000, 21000])]),
         proposal=3),
    # Average 3 vs 5 -> 0.6 -> ceil(0.6 x 5) = 3.
    Case("pods-scale-down", inp(spec([pods_metric("5")]), 5, pods(5), [samples([1000, 2000, 3000, 4000, 5000])]),
         proposal=3, current={"averageValue": "3"}),
    # TestReplicaCalcScaleUpCMUnreadyHotCpuNoLessScale: Running-but-unready pods count for custom
    # metrics: average 30 vs 15 -> 2 -> 6.
    Case("pods-unready-running-counted", inp(spec([pods_metric("15")]), 3,
                                             [_unready_new("p0"), pod("p1"), _unready_new("p2")],
                                             [samples([50000, 10000, 30000])]),
         proposal=6),
    # A Pending pod is unready: ready average 30 -> 2; rebalanced at 0: 60/3 = 20 -> 1.33 -> 4.
    Case("pods-pending-rebalanced", inp(spec([pods_metric("15")]), 3,
                                        [pod("p0"), pod("p1"), pod("p2", phase="Pending")],
                                        [samples({"p0": 30000, "p1": 30000})]),
         proposal=4),
    # Pending pod on a scale-down is just dropped: 5 vs 15 -> 0.33 -> ceil(0.67) = 1.
    Case("pods-pending-dropped-down", inp(spec([pods_metric("15")]), 3,
                                          [pod("p0"), pod("p1"), pod("p2", phase="Pending")],
                                          [samples({"p0": 5000, "p1": 5000})]),
         proposal=1),
    # Missing on scale-down counts at the target: 5/10 = 0.5; (15+10)/4 = 6.25 -> 0.625 -> ceil(2.5) = 3.
    Case("pods-missing-down", inp(spec([pods_metric("10")]), 4, pods(4), [samples([5000, 5000, 5000])]),
         proposal=3),
    # Missing on scale-up counts at 0: 30/10 = 3; 90/4 = 22.5 -> 2.25 -> ceil(9) = 9.
    Case("pods-missing-up", inp(spec([pods_metric("10")]), 4, pods(4), [samples([30000, 30000, 30000])]),
         proposal=9),
    # One sample of 12 (1.2) and three missing at 0: 3/10 = 0.3 flips the direction: keep 4.
    Case("pods-missing-flip", inp(spec([pods_metric("10")]), 4, pods(4), [samples([12000])]),
         proposal=4),
    # 1.1 is on the tolerance edge but a pod is missing so Kubernetes recomputes: 99/10 = 9.9 -> 0.99:
    # within tolerance: keep 10.
    Case("pods-missing-recomputed-in-tolerance", inp(spec([pods_metric("10")]), 10, pods(10), [samples([11000] * 9)]),
         proposal=10),
    # Pending (unready) plus missing on a scale-up: both at 0: 60/5 = 12 -> 1.2 -> ceil(6) = 6.
    Case("pods-unready-and-missing-up", inp(spec([pods_metric("10")]), 5,
                                            [pod("p0", phase="Pending"), pod("p1"), pod("p2"), pod("p3"), pod("p4")],
                                            [samples({"p1": 20000, "p2": 20000, "p3": 20000})]),
         proposal=6),
    # Integer milli average: (10+10+11)/3 = 10m (truncated) vs 9m -> 1.11 -> ceil(3.33) = 4.
    Case("pods-milli-truncation", inp(spec([pods_metric("9m")]), 3, pods(3), [samples([10, 10, 11])]),
         proposal=4, current={"averageValue": "10m"}),
    # Pods exist but no pod has a sample: nothing to average.
    Case("pods-no-samples", inp(spec([pods_metric("10")]), 2, pods(2), [samples({})]),
         proposal=None, error="did not receive metrics for targeted pods"),

    # ---------------- Object metrics --------------------------------------------------------------
    # Value: 20 vs 15 -> 1.33 x 3 ready pods -> 4; status the value 20.
    Case("object-value-up", inp(spec([object_value("15")]), 3, pods(3), [obj(20000)]),
         proposal=4, current={"value": "20"}),
    # Value within tolerance: 10.5/10 -> keep 3 before even listing pods (there are none here).
    Case("object-value-tolerance", inp(spec([object_value("10")]), 3, [], [obj(10500)]),
         proposal=3),
    # Value multiplies by the Ready pods, not the current count: 2 x 3 ready (of 5) = 6.
    Case("object-value-ready-pods", inp(spec([object_value("10")]), 5,
                                        [*pods(3), pod("p3", ready=False), pod("p4", ready=False)], [obj(20000)]),
         proposal=6),
    # No pod is Ready: ceil(2 x 0) = 0 (Kubernetes really proposes 0 here).
    Case("object-value-no-ready-pods", inp(spec([object_value("10")]), 3, pods(3, ready=False), [obj(20000)]),
         proposal=0),
    # Outside tolerance and no pods at all: "unable to calculate ready pods".
    Case("object-value-no-pods", inp(spec([object_value("10")]), 3, [], [obj(20000)]),
         proposal=None, error="unable to calculate ready pods"),
    # AverageValue: 20 / (10 x status.replicas 3) = 0.67 -> ceil(20/10) = 2; status ceil(20000/3) = 6667m.
    Case("object-average-value", inp(spec([object_avg("10")]), 3, [], [obj(20000)]),
         proposal=2, current={"averageValue": "6667m"}),
    # AverageValue in tolerance: 41 / 40 = 1.025: keep status.replicas 4; status 10250m.
    Case("object-average-tolerance", inp(spec([object_avg("10")]), 4, [], [obj(41000)]),
         proposal=4, current={"averageValue": "10250m"}),
    # AverageValue checks tolerance against status.replicas (4), not spec.replicas (5): 20/40 = 0.5 -> 2.
    Case("object-average-status-replicas", inp(spec([object_avg("10")]), 5, [], [obj(20000)], status_replicas=4),
         proposal=2),

    # ---------------- External metrics ------------------------------------------------------------
    # Value: the series are summed: 3 + 5 = 8 vs 4 -> 2 x 1 ready pod = 2; status value 8.
    Case("external-value-sum", inp(spec([ext_value("4")]), 1, pods(1), [external(3000, 5000)]),
         proposal=2, current={"value": "8"}),
    # Value within tolerance: 4.1/4 = 1.025: keep 2.
    Case("external-value-tolerance", inp(spec([ext_value("4")]), 2, pods(2), [external(4100)]),
         proposal=2),
    # AverageValue (TestReplicaCalcScaleUpPerPodCMExternal): 8.6 / (2.15 x 3) = 1.33 -> ceil(8.6/2.15) = 4;
    # status ceil(8600/3) = 2867m.
    Case("external-average-up", inp(spec([ext_avg("2150m")]), 3, [], [external(8600)]),
         proposal=4, current={"averageValue": "2867m"}),
    # The policies example: 100 / (10 x 80) = 0.125 -> ceil(100/10) = 10.
    Case("external-average-down", inp(spec([ext_avg("10")]), 80, [], [external(100000)]),
         proposal=10, current={"averageValue": "1250m"}),
    # An empty queue proposes 0 replicas (clamped later by minReplicas).
    Case("external-average-zero", inp(spec([ext_avg("1")]), 3, [], [external(0)]),
         proposal=0, desired=1, conds={"ScalingLimited": "TooFewReplicas"}),
    # AverageValue needs no pods at all: 4 / (1 x 2) = 2 -> 4.
    Case("external-average-no-pods", inp(spec([ext_avg("1")]), 2, [], [external(4000)]),
         proposal=4),
    # Per-direction tolerance: scaleUp.tolerance 0.05: 4.2/4 = 1.05 is still within: keep 2.
    Case("tolerance-up-edge", inp(spec([ext_value("4")], behavior={"scaleUp": {"tolerance": "0.05"}}), 2, pods(2),
                                  [external(4200)]),
         proposal=2),
    # 4.3/4 = 1.075 > 1.05: ceil(1.075 x 2) = 3 (the cluster's 0.1 would have kept 2).
    Case("tolerance-up-exceeded", inp(spec([ext_value("4")], behavior={"scaleUp": {"tolerance": "0.05"}}), 2, pods(2),
                                      [external(4300)]),
         proposal=3),
    # scaleDown.tolerance 0.01: 0.95 is outside: 0.95 x 100 ready pods = 95.
    Case("tolerance-down-small", inp(spec([ext_value("100")], behavior={"scaleDown": {"tolerance": "0.01"}}), 100,
                                     pods(100), [external(95000)]),
         proposal=95),
    # The same reading with the cluster tolerance 0.1: 0.95 is within: keep 100.
    Case("tolerance-down-default", inp(spec([ext_value("100")]), 100, pods(100), [external(95000)]),
         proposal=100),
    # --horizontal-pod-autoscaler-tolerance 0.2: a Pods ratio of 1.15 is within: keep 3.
    Case("tolerance-cluster-flag", inp(spec([pods_metric("10")]), 3, pods(3), [samples([11500] * 3)],
                                       config=ControllerConfig(tolerance=0.2)),
         proposal=3),

    # ---------------- several metrics, failures, edge rules (horizontal.go) -----------------------
    # The largest proposal wins: CPU 5 vs Pods 4 -> recommendation 5, named in ValidMetricFound.
    Case("largest-proposal-wins", inp(spec([cpu_util(30), pods_metric("15")]), 3, pods(3),
                                      [samples([300, 500, 700]), samples([20000, 10000, 30000])]),
         proposal=5, recommendation=5, desired=5, conds={"ScalingActive": "ValidMetricFound"}),
    # A failing metric still allows scaling up on the others: Pods asks 6, External fails -> 6.
    Case("failure-allows-scale-up", inp(spec([pods_metric("10"), ext_value("5")]), 3, pods(3),
                                        [samples([20000] * 3), failure()]),
         proposal=6, recommendation=6, desired=6, conds={"ScalingActive": "ValidMetricFound"}),
    # ... but blocks scaling down: Pods asks 1, External fails -> stay at 3, ScalingActive False with
    # the failing metric's reason.
    Case("failure-blocks-scale-down", inp(spec([pods_metric("10"), ext_value("5")]), 3, pods(3),
                                          [samples([1000] * 3), failure()]),
         proposal=1, recommendation=3, desired=3, conds={"ScalingActive": "FailedGetExternalMetric"},
         status={"ScalingActive": "False"}),
    # Equal to the current count is not "scaling down": the failure does not block; ValidMetricFound.
    Case("failure-with-equal-proposal", inp(spec([pods_metric("10"), ext_value("5")]), 3, pods(3),
                                            [samples([10000] * 3), failure()]),
         proposal=3, desired=3, conds={"ScalingActive": "ValidMetricFound"}),
    # Every metric fails: no recommendation, nothing changes, the first failure's reason.
    Case("all-metrics-fail", inp(spec([cpu_util(50), ext_value("5")]), 3, pods(3), [failure(), failure()]),
         proposal=None, error="unable to get metrics for resource cpu", recommendation=None, desired=3,
         conds={"ScalingActive": "FailedGetResourceMetric", "AbleToScale": "SucceededGetScale"}),
    # Failure reasons per source: Pods -> FailedGetPodsMetric.
    Case("failure-reason-pods", inp(spec([pods_metric("10")]), 3, pods(3), [failure()]),
         proposal=None, conds={"ScalingActive": "FailedGetPodsMetric"}),
    # Object -> FailedGetObjectMetric.
    Case("failure-reason-object", inp(spec([object_value("10")]), 3, pods(3), [failure()]),
         proposal=None, conds={"ScalingActive": "FailedGetObjectMetric"}),
    # ContainerResource -> FailedGetContainerResourceMetric.
    Case("failure-reason-container", inp(spec([container_cpu(50)]), 3, pods(3), [failure()]),
         proposal=None, conds={"ScalingActive": "FailedGetContainerResourceMetric"}),
    # Above maxReplicas: scaled to max at once, metrics are not read (no currentMetrics).
    Case("current-above-max", inp(spec([pods_metric("10")], max_r=10), 12, pods(12), [samples([1] * 12)]),
         desired=10, recommendation=None, conds={"AbleToScale": "SucceededRescale"}),
    # Below minReplicas: scaled to min at once.
    Case("current-below-min", inp(spec([pods_metric("10")], min_r=2), 1, pods(1), [samples([1])]),
         desired=2, conds={"AbleToScale": "SucceededRescale"}),
    # Target at 0 with minReplicas > 0: autoscaling is disabled.
    Case("zero-replicas-disabled", inp(spec([pods_metric("10")]), 0, [], [samples({})]),
         desired=0, conds={"ScalingActive": "ScalingDisabled"}, status={"ScalingActive": "False"}),
    # minReplicas 0 but the target was set to 0 by a person (no ScaledToZero): stays disabled.
    Case("zero-replicas-by-person", inp(spec([ext_value("1")], min_r=0), 0, [], [external(5000)]),
         desired=0, conds={"ScalingActive": "ScalingDisabled"}),
    # Scaled to zero by this autoscaler: from 0, Value targets give ceil(ratio) = ceil(2.5) = 3,
    # the legacy limit max(2 x 0, 4) = 4 allows it.
    Case("scale-up-from-zero", inp(spec([ext_value("1")], min_r=0), 0, [], [external(2500)], scaled_to_zero=True),
         proposal=3, desired=3, conds={"ScalingActive": "ValidMetricFound", "ScaledToZero": "NotScaledToZero"}),
    # Empty queue with minReplicas 0: proposal 0, desired 0, and ScaledToZero True records it.
    Case("scale-to-zero", inp(spec([ext_avg("1")], min_r=0), 3, [], [external(0)]),
         proposal=0, desired=0, conds={"ScaledToZero": "ScaledToZero", "ScalingLimited": "DesiredWithinRange"},
         status={"ScaledToZero": "True"}),
    # At zero, scaled there by us, and minReplicas since raised to 2: ceil(0.5) = 1, then not below 2.
    Case("from-zero-min-raised", inp(spec([ext_value("1")], min_r=2), 0, [], [external(500)], scaled_to_zero=True),
         proposal=1, desired=2),
    # At zero with ScaledToZero and an empty queue: ceil(0) = 0: stays at zero. No rescale, so the
    # sync sets no ScaledToZero (horizontal.go sets it only after a scale write): the status keeps
    # its True (test_conditions_kept.py).
    Case("zero-stays-zero", inp(spec([ext_value("1")], min_r=0), 0, [], [external(0)], scaled_to_zero=True),
         proposal=0, desired=0, conds={"ScalingActive": "ValidMetricFound"}),
    # The scale's selector is missing: InvalidSelector, no change.
    Case("invalid-selector", inp(spec([pods_metric("10")]), 3, pods(3), [samples([50000] * 3)],
                                 selector_error="the HPA target's scale is missing a selector"),
         desired=3, conds={"ScalingActive": "InvalidSelector"}),

    # ---------------- legacy normalization (no behavior) ------------------------------------------
    # 3 -> 5 is under the limit max(2 x 3, 4) = 6.
    Case("legacy-up-within-limit", _legacy_inp(3, 5), desired=5, recommendation=5,
         conds={"ScalingLimited": "DesiredWithinRange"}, status={"ScalingLimited": "False"}),
    # 3 -> 9 is capped at 6: ScaleUpLimit.
    Case("legacy-up-limited", _legacy_inp(3, 9), desired=6, recommendation=9,
         conds={"ScalingLimited": "ScaleUpLimit"}, status={"ScalingLimited": "True"}),
    # From 1, the limit is the minimum of 4.
    Case("legacy-up-limit-minimum", _legacy_inp(1, 10), desired=4, conds={"ScalingLimited": "ScaleUpLimit"}),
    # maxReplicas 10 is below the limit 16: TooManyReplicas.
    Case("legacy-up-max", _legacy_inp(8, 30, max_r=10), desired=10, conds={"ScalingLimited": "TooManyReplicas"}),
    # A recommendation of 10 a minute ago holds 10 (the window's highest): ScaleDownStabilized, no scale.
    Case("legacy-down-stabilized", _legacy_inp(10, 5, History(recs((60, 10)))), desired=10, recommendation=5,
         conds={"AbleToScale": "ScaleDownStabilized"}),
    # A recommendation of 8 holds the scale-down at 8.
    Case("legacy-down-partly-stabilized", _legacy_inp(10, 5, History(recs((60, 8)))), desired=8),
    # A recommendation 400 s old is outside the 300 s window: 5.
    Case("legacy-window-expired", _legacy_inp(10, 5, History(recs((400, 10)))), desired=5),
    # With --horizontal-pod-autoscaler-downscale-stabilization 600s it is inside again: 10.
    Case("legacy-window-flag", _legacy_inp(10, 5, History(recs((400, 10))),
                                           config=ControllerConfig(downscale_stabilization_window=600)), desired=10),
    # Below minReplicas: TooFewReplicas.
    Case("legacy-min", _legacy_inp(5, 0, min_r=2), desired=2, conds={"ScalingLimited": "TooFewReplicas"}),
    # Nothing to do: ReadyForNewScale and DesiredWithinRange.
    Case("legacy-ready-for-new-scale", _legacy_inp(5, 5), desired=5,
         conds={"AbleToScale": "ReadyForNewScale", "ScalingLimited": "DesiredWithinRange"}),
    # The legacy window only holds back scale-downs: an older 2 does not slow 4 -> 6.
    Case("legacy-up-not-stabilized", _legacy_inp(4, 6, History(recs((60, 2)))), desired=6),
    # Fresh controller: the current 10 is recorded first, so a drop to 5 waits the window out.
    Case("legacy-fresh-controller", _legacy_inp(10, 5, History()), desired=10,
         conds={"AbleToScale": "ScaleDownStabilized"}),

    # ---------------- behavior normalization ------------------------------------------------------
    # Default scale-up rules: max(3 + 4 pods, 3 x 200%) = 7 per 15 s.
    Case("behavior-default-up", _beh_inp({}, 3, 20), desired=7, conds={"ScalingLimited": "ScaleUpLimit"}),
    # From 10 the 100% policy wins: 20.
    Case("behavior-default-up-percent", _beh_inp({}, 10, 50), desired=20),
    # Default scale-down window (the 300 s flag) with a fresh controller holds 10.
    Case("behavior-default-down-fresh", _beh_inp({}, 10, 5, History()), desired=10,
         conds={"AbleToScale": "ScaleDownStabilized"}),
    # Window 0 and the default 100%/15 s policy: straight to 2.
    Case("behavior-down-no-window", _beh_inp(DOWN0, 10, 2), desired=2, conds={"ScalingLimited": "DesiredWithinRange"}),
    # Pods 1 per 60 s: 9.
    Case("behavior-down-pods-policy", _beh_inp({"scaleDown": {"stabilizationWindowSeconds": 0, "policies": [
        {"type": "Pods", "value": 1, "periodSeconds": 60}]}}, 10, 2), desired=9,
         conds={"ScalingLimited": "ScaleDownLimit"}),
    # Pods 2 per 60 s and 2 pods already removed 30 s ago: the period started at 12, 12 - 2 = 10: no room.
    Case("behavior-down-period-used", _beh_inp({"scaleDown": {"stabilizationWindowSeconds": 0, "policies": [
        {"type": "Pods", "value": 2, "periodSeconds": 60}]}}, 10, 2,
        History((), (), events((30, 2)))), desired=10, conds={"ScalingLimited": "ScaleDownLimit"}),
    # The same event 90 s ago is outside the 60 s period: 10 - 2 = 8.
    Case("behavior-down-period-expired", _beh_inp({"scaleDown": {"stabilizationWindowSeconds": 0, "policies": [
        {"type": "Pods", "value": 2, "periodSeconds": 60}]}}, 10, 2,
        History((), (), events((90, 2)))), desired=8),
    # selectPolicy Min on scale-down: max(80 - 4, 80 x 0.9) = 76 (the smallest change).
    Case("behavior-down-select-min", _beh_inp({"scaleDown": {"stabilizationWindowSeconds": 0, "selectPolicy": "Min",
                                                           "policies": [
        {"type": "Pods", "value": 4, "periodSeconds": 60},
        {"type": "Percent", "value": 10, "periodSeconds": 60}]}}, 80, 10),
        desired=76),
    # selectPolicy Max (default): min(76, 72) = 72, the documented example.
    Case("behavior-down-select-max", _beh_inp({"scaleDown": {"stabilizationWindowSeconds": 0, "policies": [
        {"type": "Pods", "value": 4, "periodSeconds": 60}, {"type": "Percent", "value": 10, "periodSeconds": 60}]}}, 80,
                                              10),
        desired=72, recommendation=10, conds={"ScalingLimited": "ScaleDownLimit"}),
    # scaleDown Disabled: never below the current count.
    Case("behavior-down-disabled",
         _beh_inp({"scaleDown": {"stabilizationWindowSeconds": 0, "selectPolicy": "Disabled"}}, 10, 2),
         desired=10, conds={"ScalingLimited": "ScaleDownLimit"}),
    # scaleUp Disabled: never above the current count.
    Case("behavior-up-disabled", _beh_inp({"scaleUp": {"selectPolicy": "Disabled"}}, 3, 10),
         desired=3, conds={"ScalingLimited": "ScaleUpLimit"}),
    # Percent 50 per 60 s rounds up: ceil(3 x 1.5) = 5.
    Case("behavior-up-percent-ceil", _beh_inp({"scaleUp": {"policies": [
        {"type": "Percent", "value": 50, "periodSeconds": 60}]}}, 3, 10), desired=5),
    # Pods 2 per 60 s, 2 added 30 s ago: the period started at 1, 1 + 2 = 3: no room now.
    Case("behavior-up-period-used", _beh_inp({"scaleUp": {"policies": [
        {"type": "Pods", "value": 2, "periodSeconds": 60}]}}, 3, 10, History((), events((30, 2)), ())), desired=3),
    # 5 added within the period: the limit (0) is below current: clamped to current, no scale-down.
    Case("behavior-up-limit-below-current", _beh_inp({"scaleUp": {"policies": [
        {"type": "Pods", "value": 2, "periodSeconds": 60}]}}, 3, 10, History((), events((30, 5)), ())), desired=3),
    # selectPolicy Min on scale-up: min(10 + 4, 10 x 2) = 14.
    Case("behavior-up-select-min", _beh_inp({"scaleUp": {"selectPolicy": "Min", "policies": [
        {"type": "Pods", "value": 4, "periodSeconds": 60}, {"type": "Percent", "value": 100, "periodSeconds": 60}]}},
                                            10, 30),
        desired=14),
    # Scale-up window 120 s with a 4 a minute ago: the lowest recent is 4: 3 -> 4.
    Case("behavior-up-stabilized-partly", _beh_inp({"scaleUp": {"stabilizationWindowSeconds": 120}}, 3, 8,
                                                   History(recs((60, 4)))), desired=4,
         conds={"ScalingLimited": "DesiredWithinRange"}),
    # Scale-up window with a 2 a minute ago: the lowest recent is below current: hold 3, ScaleUpStabilized.
    Case("behavior-up-stabilized", _beh_inp({"scaleUp": {"stabilizationWindowSeconds": 120}}, 3, 8,
                                            History(recs((60, 2)))), desired=3,
         conds={"AbleToScale": "ScaleUpStabilized"}),
    # Scale-down window 60 s, the 10 was 90 s ago: forgotten: 5.
    Case("behavior-down-window-expired", _beh_inp({"scaleDown": {"stabilizationWindowSeconds": 60}}, 10, 5,
                                                  History(recs((90, 10)))), desired=5),
    # Scale-down window 60 s, an 8 30 s ago: hold 8.
    Case("behavior-down-window-holds", _beh_inp({"scaleDown": {"stabilizationWindowSeconds": 60}}, 10, 5,
                                                History(recs((30, 8)))), desired=8),
    # maxReplicas below the policy limit (16): TooManyReplicas.
    Case("behavior-up-max", _beh_inp({}, 8, 30, max_r=10), desired=10, conds={"ScalingLimited": "TooManyReplicas"}),
    # The 100% policy allows 0 but minReplicas is 2: TooFewReplicas.
    Case("behavior-down-min", _beh_inp(DOWN0, 5, 0, min_r=2), desired=2, conds={"ScalingLimited": "TooFewReplicas"}),
    # scaleDown without a window takes the controller's flag (300 s): a 10 200 s ago holds.
    Case("behavior-down-window-from-flag", _beh_inp({"scaleDown": {"policies": [
        {"type": "Percent", "value": 100, "periodSeconds": 15}]}}, 10, 5, History(recs((200, 10)))), desired=10),
    # ... and with the flag at 60 s the same 10 is forgotten: 5.
    Case("behavior-down-window-flag-60", _beh_inp({"scaleDown": {"policies": [
        {"type": "Percent", "value": 100, "periodSeconds": 15}]}}, 10, 5, History(recs((200, 10))),
        config=ControllerConfig(downscale_stabilization_window=60)), desired=5),
    # Both event lists shape the period start: 5 - 1 added + 2 removed = 6; Percent 100 -> 12.
    Case("behavior-up-mixed-events", _beh_inp({"scaleUp": {"policies": [
        {"type": "Percent", "value": 100, "periodSeconds": 60}]}}, 5, 20,
                                              History((), events((30, 1)), events((30, 2)))),
        desired=12),
]


def _check(case: Case) -> None:
    d = decide(case.input)
    if case.proposal is not SKIP:
        assert d.proposals[0].replicas == case.proposal, d.explanation
    if case.error is not None:
        assert case.error in (d.proposals[0].error or ""), d.proposals[0]
    if case.desired is not SKIP:
        assert d.desired_replicas == case.desired, d.explanation
    if case.recommendation is not SKIP:
        assert d.recommendation == case.recommendation, d.explanation
    got = {c.type: c for c in d.conditions}
    for ctype, reason in case.conds.items():
        assert ctype in got, (ctype, d.conditions)
        assert got[ctype].reason == reason, (got[ctype], d.explanation)
    for ctype, status in case.status.items():
        assert got[ctype].status == status, got[ctype]
    if case.current is not None:
        status = d.current_metrics[0]
        inner = status[next(k for k in status if k != "type")]
        for key, value in case.current.items():
            assert inner["current"][key] == value, inner


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_decision_table(case: Case) -> None:
    _check(case)

