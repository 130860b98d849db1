"""Quantities: parsing (the official client's) and apimachinery's canonical spelling."""

from decimal import Decimal

import pytest
from hypothesis import given, settings, strategies as st

from promscaler.quantity import (
    QuantityError, _decimal_milli, _float_milli, format_milli, format_quantity, parse_quantity, to_milli,
)


@pytest.mark.parametrize(
    "text, value",
    [
        ("1500m", Decimal("1.5")),
        ("1.5k", Decimal("1500")),
        ("2Gi", Decimal(2 * 1024**3)),
        ("100Mi", Decimal(100 * 1024**2)),
        ("1e3", Decimal(1000)),
        ("250m", Decimal("0.25")),
        ("0", Decimal(0)),
        ("12", Decimal(12)),
    ],
)
def test_parse(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("bad", ["", "abc", " 1", "1 ", "1.5.5", "5x", "m", "1mm", None, True, float("nan"), float("inf")])
def test_parse_rejects(bad):
    with pytest.raises(QuantityError):
        parse_quantity(bad)


@pytest.mark.parametrize(
    "value, binary, canonical",
    [
        (Decimal("1.5"), False, "1500m"),    # fractional -> milli suffix
        (Decimal("1500"), False, "1500"),    # not a whole number of thousands: no k
        (Decimal("2000"), False, "2k"),
        (Decimal("60"), False, "60"),
        (Decimal("0.25"), False, "250m"),
        (Decimal(0), False, "0"),
        (Decimal("-1.5"), False, "-1500m"),
        (Decimal(1536 * 1024**2), True, "1536Mi"),   # 1.5Gi is spelled in Mi
        (Decimal(2 * 1024**3), True, "2Gi"),
        (Decimal(1000), True, "1000"),               # not a multiple of 1024: plain
        (Decimal(2 * 1024**3), False, "2147483648"),
        (Decimal("3000000"), False, "3M"),
    ],
)
def test_format(value, binary, canonical):
    assert format_quantity(value, binary=binary) == canonical


def test_reading_rounds_up_like_apimachinery():
    # MilliValue() rounds up: 1/3 of a unit is 334m, never 333m.
    assert to_milli("0.3333") == 334
    assert to_milli("-0.0005") == 0
    assert to_milli("2") == 2000
    assert format_milli(1500) == "1500m"


@pytest.mark.parametrize("value, served", [
    (2.4999999999999996, "2500m"),  # noise: prometheus-adapter's plain int64(v*1000) would serve 2499m
    (12 / 7, "1714m"),              # 1.7142857...: truncated, as NewMilliQuantity(int64(v*1000)) does
    (1 / 3, "333m"),
    (0.0004, "0"),                  # below a milli-unit: 0, not 1m
    (0.0009999, "0"),
    (0.1 + 0.2, "300m"),
    (-12 / 7, "-1714m"),            # int64() truncates towards zero
    (-0.0004, "0"),
    (5.0, "5"),
    (1.9999999999, "1999m"),        # 11 digits: a real value, not noise
])
def test_served_values_truncate_like_prometheus_adapter(value, served):
    assert format_quantity(value) == served


@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_milli_round_trip(milli):
    assert to_milli(format_milli(milli)) == milli


@settings(max_examples=3000, deadline=None)
@given(st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                 st.floats(min_value=-1e6, max_value=1e6),
                 st.integers(-10**7, 10**7).map(lambda i: i / 1000),
                 st.integers(-10**9, 10**9).map(float)))
def test_float_fast_path_equals_decimal(value):
    # format_quantity's float shortcut must truncate exactly as the Decimal reading of 15 digits does.
    assert _float_milli(value) == _decimal_milli(value), value


@pytest.mark.parametrize("value", [0.0, -0.0, 0.0005, -0.0005, 0.001, 1.5, -1.5, 1e-7, 1e21, 2.3333333333333335,
                                   1536.0, 1e18, 123456.789, 0.1 + 0.2])
def test_float_fast_path_edge_cases(value):
    assert _float_milli(value) == _decimal_milli(value)
