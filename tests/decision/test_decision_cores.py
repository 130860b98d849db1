"""The replica calculator's and normalization's numeric cores, on numbers worked out by hand.

The engine and `fast_replay` both decide through these functions; the engine's own tests check
them through `decide()`, these check each core alone (and its notes, which the engine shows)."""

from __future__ import annotations

import math
from typing import Any

from autoscaler.decision.engine import metrics_hold, proposal_wins, replicas_before_metrics
from autoscaler.decision.normalize import legacy_limit, limit_with_behaviors, stabilized_with_behaviors
from autoscaler.decision.replicas import (
    MAX_INT32,
    Tolerances,
    per_pod_ratio,
    per_pod_total_count,
    plain_metric_count,
    ratio_count,
    recomputed_count,
    render_notes,
    usage_ratio_count,
)

from .decision_helpers import NOW, events, pods_metric, spec

TOL = Tolerances(0.1, 0.1)
TIGHT = Tolerances(0.05, 0.05)


def test_ratio_count_keeps_current_within_each_directions_tolerance():
    tol = Tolerances(0.2, 0.05)
    notes: list[Any] = []
    assert ratio_count(4, 0.85, 3, tol, notes) == 4   # 15 % below: within the 20 % scale-down band
    assert render_notes(notes) == ("ratio 0.850 is within tolerance [down:20.0%, up:5.0%]: keep 4",)
    assert ratio_count(4, 1.08, 3, tol) == 4          # ceil(1.08 x 3) = ceil(3.24)
    assert ratio_count(4, 1.5, 3, tol) == 5           # ceil(4.5)
    assert ratio_count(4, math.nan, 3, tol) == 0      # never within; nothing to scale to
    assert ratio_count(4, 1e12, 3, tol) == MAX_INT32


def test_plain_metric_count_recomputes_with_unready_pods_at_zero():
    # 3 ready pods at 1500m (4500m in all), 2 unready, target 1000m, 5 replicas: the first ratio
    # 1.5 asks for ceil(1.5 x 3) = 5, but a scale-up with unready pods averages again over 5 pods
    # with the unready at 0: 4500 / 5 = 900m, ratio 0.9 -- it would reverse the direction: keep 5.
    notes: list[Any] = []
    assert plain_metric_count(5, 4500, 3, 1000, 3, 2, 0, TIGHT, notes) == 5
    assert render_notes(notes) == (
        "scale-up: not-yet-ready pods counted at 0",
        "recomputed: average 900m, ratio 0.900 over 5 pods",
        "recomputed ratio would reverse the direction: keep 5",
    )
    # With a 10 % band, 0.9 is within tolerance: keep 5 for that reason instead.
    notes = []
    assert plain_metric_count(5, 4500, 3, 1000, 3, 2, 0, TOL, notes) == 5
    assert render_notes(notes)[-1] == "recomputed ratio is within tolerance [down:10.0%, up:10.0%]: keep 5"
    # 3 ready at 2400m, 2 unready: 7200 / 5 = 1440m, ratio 1.44, ceil(1.44 x 5) = ceil(7.2) = 8.
    assert plain_metric_count(5, 7200, 3, 1000, 3, 2, 0, TOL) == 8


def test_plain_metric_count_keeps_current_when_the_recomputed_count_goes_against_the_ratio():
    # 10 replicas, 3 ready at 2000m and 2 unready (5 gone from the count): 6000 / 5 = 1200m,
    # ratio 1.2 asks for ceil(1.2 x 5) = 6 pods, fewer than 10 on a ratio above 1: keep 10.
    notes: list[Any] = []
    assert plain_metric_count(10, 6000, 3, 1000, 3, 2, 0, TOL, notes) == 10
    assert render_notes(notes)[-1] == "6 pods would move against the ratio's direction: keep 10"


def test_plain_metric_count_counts_missing_pods_at_the_target_down_and_at_zero_up():
    # 4 ready pods at 500m, 1 without a metric: ratio 0.5; counted at the target, 3000 / 5 = 600m,
    # ceil(0.6 x 5) = 3 (the first ratio alone would give ceil(0.5 x 4) = 2).
    notes: list[Any] = []
    assert plain_metric_count(5, 2000, 4, 1000, 4, 0, 1, TOL, notes) == 3
    assert render_notes(notes)[:2] == ("scale-down: pods without a metric counted at exactly the target",
                                       "recomputed: average 600m, ratio 0.600 over 5 pods")
    # 4 ready at 1300m, 1 without: ratio 1.3; counted at 0, 5200 / 5 = 1040m is within tolerance:
    # keep 5 (the first ratio alone would give ceil(1.3 x 4) = 6).
    assert plain_metric_count(5, 5200, 4, 1000, 4, 0, 1, TOL) == 5


def test_plain_metric_count_without_unready_or_missing_pods_scales_by_the_ready_pods():
    # 4 samples, 7001m in all: the average truncates to 1750m, ratio 1.75, ceil(1.75 x 4) = 7.
    assert plain_metric_count(4, 7001, 4, 1000, 4, 0, 0, TOL) == 7
    # Unready pods on a scale-down are not recomputed: ceil(0.5 x 4) = 2.
    assert plain_metric_count(6, 2000, 4, 1000, 4, 2, 0, TOL) == 2


def test_recomputed_count_each_verdict():
    assert recomputed_count(4, 1.4, 1.05, 5, TOL) == 4    # within tolerance
    assert recomputed_count(4, 0.8, 1.3, 5, TOL) == 4     # would reverse the direction
    assert recomputed_count(4, 0.5, 0.7, 8, TOL) == 4     # ceil(5.6) = 6 > 4 on a ratio below 1
    assert recomputed_count(6, 0.5, 0.7, 5, TOL) == 4     # ceil(3.5): fewer on a ratio below 1
    assert recomputed_count(4, 0.5, 0.5, 5, TOL) == 3     # ceil(2.5)


def test_usage_ratio_count():
    # From zero replicas: ceil(ratio) with no tolerance, so 1050m over a 1000m target wakes 2 pods.
    assert usage_ratio_count(0, 1050, 1000, None, TOL) == 2
    notes: list[Any] = []
    assert usage_ratio_count(3, 1050, 1000, 2, TOL, notes) == 3   # within tolerance
    assert render_notes(notes) == ("ratio 1.050 is within tolerance [down:10.0%, up:10.0%]: keep 3",)
    notes = []
    assert usage_ratio_count(3, 2500, 1000, 2, TOL, notes) == 5   # ceil(2.5 x 2 ready pods)
    assert render_notes(notes) == ("2.500 x 2 ready pods",)
    # No pods: the ready count is needed only outside the tolerance, and then there is none.
    assert usage_ratio_count(3, 1050, 1000, None, TOL) == 3
    assert usage_ratio_count(3, 2500, 1000, None, TOL) is None


def test_per_pod_total_count_divides_the_total_by_the_target_per_pod():
    assert per_pod_ratio(4, 4200, 1000) == 1.05
    assert per_pod_total_count(4, 4200, 1000, TOL) == 4          # within tolerance: status.replicas
    assert per_pod_total_count(3, 4500, 1000, TOL) == 5          # ceil(4500 / 1000)
    assert per_pod_total_count(2, 4500, 1000, TOL) == 5          # the same: status only sets the band
    assert per_pod_ratio(0, 300, 1000) == math.inf
    assert per_pod_total_count(0, 300, 1000, TOL) == 1           # ceil(0.3)
    assert math.isnan(per_pod_ratio(0, 0, 1000))
    assert per_pod_total_count(0, 0, 1000, TOL) == 0
    notes: list[Any] = []
    assert per_pod_total_count(4, 3800, 1000, TOL, notes) == 4
    assert render_notes(notes) == (
        "ratio 0.950 (with status.replicas 4) is within tolerance [down:10.0%, up:10.0%]: keep 4",)


def test_legacy_limit():
    # From 3 replicas the scale-up limit is max(2 x 3, 4) = 6; from 1 it is 4.
    steps: list[Any] = []
    assert legacy_limit(3, 9, 1, 10, steps) == (6, "ScaleUpLimit")
    assert render_notes(steps) == ("scale-up limit max(2 x 3, 4) = 6: 9 -> 6",)
    assert legacy_limit(1, 7, 1, 10) == (4, "ScaleUpLimit")
    assert legacy_limit(3, 9, 1, 5) == (5, "TooManyReplicas")    # maxReplicas below the limit
    assert legacy_limit(3, 6, 1, 6) == (6, "DesiredWithinRange")
    assert legacy_limit(3, 1, 2, 10) == (2, "TooFewReplicas")
    assert legacy_limit(3, 0, 0, 10) == (0, "DesiredWithinRange")


def test_stabilized_with_behaviors():
    # Not below the scale-up window's lowest (unless current is), not above the scale-down window's highest.
    assert stabilized_with_behaviors(5, 7, 9) == 7
    assert stabilized_with_behaviors(5, 3, 9) == 5
    assert stabilized_with_behaviors(5, 7, 4) == 4
    assert stabilized_with_behaviors(5, 3, 2) == 2


def test_limit_with_behaviors_reads_the_events_with_or_without_steps():
    behavior = {"scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                            "policies": [{"type": "Pods", "value": 2, "periodSeconds": 60}]},
                "scaleDown": {"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 50,
                                                                  "periodSeconds": 60}]}}
    s = spec([pods_metric("1")], min_r=2, max_r=20, behavior=behavior)
    ups = events((30, 1))   # one pod added 30 s ago: 5 - 1 = 4 at the period's start, + 2 = 6
    steps: list[Any] = []
    assert limit_with_behaviors(s, 5, 10, 2, ups, (), NOW, steps) == (6, "ScaleUpLimit")
    assert limit_with_behaviors(s, 5, 10, 2, ups, (), NOW) == (6, "ScaleUpLimit")
    assert render_notes(steps)[-1] == "allowed up to min(maxReplicas 20, policy limit 6) = 6: 6"
    assert limit_with_behaviors(s, 5, 6, 2, ups, (), NOW) == (6, "DesiredWithinRange")
    assert limit_with_behaviors(s, 8, 1, 2, (), (), NOW) == (4, "ScaleDownLimit")   # int(8 x 0.5)
    assert limit_with_behaviors(s, 3, 1, 2, (), (), NOW) == (2, "TooFewReplicas")   # int(1.5) = 1 < min 2


def test_replicas_before_metrics_settles_zero_and_out_of_range_counts_first():
    assert replicas_before_metrics(0, 1, 10) == 0                    # at zero, min 1, not put there: stays 0
    assert replicas_before_metrics(0, 0, 10) == 0                    # at zero, not put there: disabled, stays 0
    assert replicas_before_metrics(0, 2, 10, from_zero=True) is None  # scaled there by the HPA: the metrics decide
    assert replicas_before_metrics(12, 2, 10) == 10                  # above max: straight to max
    assert replicas_before_metrics(1, 2, 10) == 2                    # below min: straight to min
    assert replicas_before_metrics(2, 2, 10) is None                 # the bounds themselves: the metrics decide
    assert replicas_before_metrics(10, 2, 10) is None
    assert replicas_before_metrics(5, 2, 10, from_zero=True) is None


def test_proposal_wins_takes_the_largest_and_any_first_proposal():
    assert proposal_wins(0, 3)          # nothing yet: the first valid proposal wins
    assert proposal_wins(0, 0)
    assert proposal_wins(4, 7)          # 7 > 4
    assert not proposal_wins(4, 4)      # a tie keeps the first metric's (its label)
    assert not proposal_wins(4, 2)
    best = 0
    for proposal in (3, 8, 5):          # three metrics: max(3, 8, 5) = 8
        if proposal_wins(best, proposal):
            best = proposal
    assert best == 8


def test_metrics_hold_when_all_fail_or_a_failure_would_be_a_scale_down():
    assert metrics_hold(4, 0, 2, 2)          # 2 of 2 failed: keep current
    assert metrics_hold(4, 3, 1, 2)          # 1 of 2 failed and the other asks 3 < 4: no scale-down
    assert not metrics_hold(4, 6, 1, 2)      # 1 of 2 failed, the other asks 6 > 4: scaling up is allowed
    assert not metrics_hold(4, 4, 1, 2)      # asks the current 4: not a scale-down, normalization decides
    assert not metrics_hold(4, 3, 0, 2)      # none failed: 3 goes on to normalization
    assert metrics_hold(4, 9, 3, 3)          # all failed (best is meaningless)
