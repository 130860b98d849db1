import pytest

from autoscaler.controller.leases import check_timings, duration_seconds, held_for, leases_path


def test_timings_follow_client_go():
    check_timings(15, 10, 2)  # client-go's defaults
    for bad in [(10, 10, 2), (15, 2, 2), (15, 10, 0), (5, 10, 2)]:
        with pytest.raises(ValueError, match="lease-duration > renew-deadline > retry-period > 0"):
            check_timings(*bad)


# rounded up: a holder given 2.4 s (renew deadline below it) must not be taken over after 2 s
@pytest.mark.parametrize("seconds, written", [(15.0, 15), (2.6, 3), (2.4, 3), (0.3, 1), (1.0, 1)])
def test_duration_is_whole_seconds_at_least_one_never_shorter(seconds, written):
    assert duration_seconds(seconds) == written


def test_held_for_reads_the_record_or_falls_back():
    assert held_for({"leaseDurationSeconds": 7}, 15.0) == 7.0
    assert held_for({}, 15.0) == 15.0


def test_leases_path():
    assert leases_path("kube-system") == "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
