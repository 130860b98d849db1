from datetime import UTC, datetime

import pytest

from promscaler.times import (
    DurationError,
    format_duration,
    format_time,
    go_duration,
    micro_time,
    parse_duration,
    parse_time,
)


@pytest.mark.parametrize(
    "text, seconds", [("30s", 30), ("1m30s", 90), ("300ms", 0.3), ("1h", 3600), ("15", 15), (300, 300), ("0", 0)]
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["", "1x", "m", "-5s", -1, "5 s"])
def test_parse_duration_rejects(bad):
    with pytest.raises(DurationError):
        parse_duration(bad)


def test_format_duration():
    assert [format_duration(s) for s in (90, 300, 3600, 0.5, 0, 3661)] == ["1m30s", "5m", "1h", "500ms", "0s", "1h1m1s"]
    # whole days as Prometheus spells them (backtest's "fetched 1d1h of history", docs/forecast-and-tune.md),
    # except that a week stays 7d as the docs' `seasons: [7d, 1d]` (Prometheus' model.Duration prints 1w)
    assert [format_duration(s) for s in (86400, 90000, 7 * 86400, 86401, 84600)] == ["1d", "1d1h", "7d", "1d1s",
                                                                                      "23h30m"]
    assert parse_duration(format_duration(90061)) == 90061


def test_times_round_trip():
    t = parse_time("2026-01-01T00:09:45Z")
    assert t == datetime(2026, 1, 1, 0, 9, 45, tzinfo=UTC)
    assert format_time(parse_time("2026-01-01T01:09:45+01:00")) == "2026-01-01T00:09:45Z"
    with pytest.raises(DurationError):
        parse_time("yesterday")


@pytest.mark.parametrize(
    "seconds, spelled",
    [
        (180, "3m0s"),
        (3600, "1h0m0s"),
        (30, "30s"),
        (90, "1m30s"),
        (0.5, "500ms"),
        (0, "0s"),
        (3661.5, "1h1m1.5s"),
        (0.0015, "1.5ms"),
        (7200, "2h0m0s"),
    ],
)
def test_go_duration_spells_as_time_duration_string(seconds, spelled):
    # Go: (3 * time.Minute).String() == "3m0s"; metav1.Duration serializes so (metrics.k8s.io window)
    assert go_duration(seconds) == spelled


def test_micro_time():
    # metav1.MicroTime: RFC 3339 with six fractional digits, in UTC
    when = datetime(2026, 1, 1, 0, 9, 45, 120, tzinfo=UTC)
    assert micro_time(when) == "2026-01-01T00:09:45.000120Z"
    assert parse_time(micro_time()) <= datetime.now(UTC)
