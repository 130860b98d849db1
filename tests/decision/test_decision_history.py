"""The history decide() returns and record_scale() extends: the controller's memory, passed by value."""

from __future__ import annotations

from autoscaler.decision import History, Recommendation, ScaleEvent, decide, record_scale

from .decision_helpers import NOW, ago, events, ext_avg, external, inp, recs, spec, want


def test_fresh_controller_seeds_current_then_records_recommendation() -> None:
    # No remembered recommendations: the current 10 is recorded at now first (Kubernetes'
    # recordInitialRecommendation), then this sync's recommendation (5).
    metric, reading = want(5, 10)
    d = decide(inp(spec([metric]), 10, [], [reading], history=History()))
    assert d.history.recommendations == (Recommendation(NOW, 10), Recommendation(NOW, 5))
    assert d.desired_replicas == 10


def test_seed_is_kept_even_when_no_recommendation_is_made() -> None:
    # All metrics fail: nothing is recommended, but the first-sync seed is still remembered.
    from .decision_helpers import failure
    d = decide(inp(spec([ext_avg("1")]), 4, [], [failure()], history=History()))
    assert d.recommendation is None and d.history.recommendations == (Recommendation(NOW, 4),)


def test_old_recommendations_are_forgotten() -> None:
    # Legacy window 300 s: the 400 s old sample is dropped, the 100 s old one kept, the new one appended.
    metric, reading = want(5, 10)
    h = History(recs((400, 9), (100, 6)))
    d = decide(inp(spec([metric]), 10, [], [reading], history=h))
    assert d.history.recommendations == (Recommendation(ago(100), 6), Recommendation(NOW, 5))


def test_events_pass_through_decide_unchanged() -> None:
    h = History(recs((10, 3)), events((20, 2)), events((30, 1)))
    d = decide(inp(spec([ext_avg("1")], behavior={}), 3, [], [external(3000)], history=h))
    assert d.history.scale_up_events == h.scale_up_events and d.history.scale_down_events == h.scale_down_events


def test_record_scale_up_and_down() -> None:
    s = spec(
        [ext_avg("1")],
        behavior={
            "scaleUp": {"policies": [{"type": "Pods", "value": 4, "periodSeconds": 60}]},
            "scaleDown": {"policies": [{"type": "Percent", "value": 10, "periodSeconds": 120}]},
        },
    )
    h = History((), events((90, 2), (30, 1)), events((200, 5), (100, 1)))
    up = record_scale(h, NOW, 3, 7, s)
    # scale-up events older than the longest scale-up period (60 s) are dropped; +4 appended
    assert up.scale_up_events == (ScaleEvent(ago(30), 1), ScaleEvent(NOW, 4))
    assert up.scale_down_events == h.scale_down_events
    down = record_scale(h, NOW, 7, 4, s)
    assert down.scale_down_events == (ScaleEvent(ago(100), 1), ScaleEvent(NOW, 3))
    assert record_scale(h, NOW, 5, 5, s) is h


def test_record_scale_without_behavior_stores_nothing() -> None:
    # Kubernetes keeps scale events only for autoscalers with behavior (they feed the policies).
    h = History(())
    assert record_scale(h, NOW, 2, 6, spec([ext_avg("1")])) is h
    # without a spec: kept for the longest period any policy may have (1800 s)
    h2 = History((), events((2000, 1), (1000, 2)))
    assert record_scale(h2, NOW, 2, 6).scale_up_events == (ScaleEvent(ago(1000), 2), ScaleEvent(NOW, 4))
