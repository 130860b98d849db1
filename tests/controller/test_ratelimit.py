"""The client's token bucket (--kube-api-qps / --kube-api-burst), on a hand-moved clock."""

from __future__ import annotations

import pytest

from autoscaler.controller.cli import build_parser, settings_from_args
from promscaler.ratelimit import TokenBucket


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_passes_then_requests_wait_one_qps_interval_each_in_arrival_order():
    clock = Clock()
    bucket = TokenBucket(qps=10, burst=3, clock=clock)
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert [round(bucket.reserve(), 6) for _ in range(3)] == [0.1, 0.2, 0.3]
    assert bucket.tokens == pytest.approx(-3.0)  # three tokens owed
    clock.now += 1.0  # 10 tokens accrue, 3 owed: the bucket refills to at most its burst
    assert bucket.reserve() == 0.0
    assert bucket.tokens == pytest.approx(2.0)  # min(3, -3 + 10) - 1


def test_tokens_accrue_at_qps_up_to_burst_only():
    clock = Clock()
    bucket = TokenBucket(qps=2, burst=2, clock=clock)
    bucket.reserve(), bucket.reserve()
    clock.now += 60.0  # a long idle time saves no more than the burst
    assert [bucket.reserve() for _ in range(2)] == [0.0, 0.0]
    assert bucket.reserve() == pytest.approx(0.5)


def test_flags_named_as_kube_controller_manager_with_defaults_for_1000_autoscalers():
    s = settings_from_args(build_parser().parse_args([]))
    assert (s.kube_api_qps, s.kube_api_burst) == (500.0, 1000)
    # 1,000 autoscalers every 15 s, a scale read, two metrics and a status write each: under the default rate
    assert s.kube_api_qps > 1000 * 4 / 15
    s = settings_from_args(build_parser().parse_args(["--kube-api-qps=20", "--kube-api-burst=30"]))
    assert (s.kube_api_qps, s.kube_api_burst) == (20.0, 30)


def test_dry_run_writes_no_lease_unless_asked():
    parse = build_parser().parse_args
    assert settings_from_args(parse([])).leader_elect is True
    assert settings_from_args(parse(["--dry-run"])).leader_elect is False
    assert settings_from_args(parse(["--dry-run", "--leader-elect=true"])).leader_elect is True
