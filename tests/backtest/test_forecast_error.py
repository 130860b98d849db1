"""A forecast's error against the load it forecast (`forecasterror.py`), on arrays worked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autoscaler.backtest.forecasterror import ForecastCheck, came, forecast_error

NAN = math.nan


def _same(a: np.ndarray, b: list[float]) -> bool:
    return np.array_equal(a, np.array(b), equal_nan=True)


def test_the_load_that_came_a_horizon_later():
    load = np.array([1.0, 2.0, 3.0, NAN, 5.0])
    assert _same(came(load, 2), [3, NAN, 5, NAN, NAN])           # two steps on; none past the end
    assert _same(came(load, 0), [1, 2, 3, NAN, 5])
    assert _same(came(load, 0.5), [1.5, 2.5, NAN, NAN, NAN])     # half-way between two steps; NaN beside a gap
    assert _same(came(load, 300 / 15), [NAN] * 5)                # a horizon longer than the range
    assert _same(came(load, 0.3 / 0.1), [NAN, 5, NAN, NAN, NAN])  # 2.9999999999999996 steps is 3


def test_bias_relative_bias_and_below_by_hand():
    # compared where both are known: (10, 12), (20, 15), (30, 30): differences -2, 5, 0
    e = forecast_error(np.array([10.0, 20.0, 30.0, NAN, 5.0]), np.array([12.0, 15.0, 30.0, 7.0, NAN]))
    assert e.steps == 3
    assert e.bias == pytest.approx(1.0)
    assert e.relative_bias == pytest.approx(1.0 / 19.0)         # over the mean load that came, 57 / 3
    assert e.below == pytest.approx(1 / 3)                       # 10 < 12 only; 30 = 30 is not below
    assert e.row() == {"steps": 3, "bias": e.bias, "relativeBias": e.relative_bias, "belowShare": e.below}
    check = ForecastCheck("Pods web_forecast", 300.0, np.array([10.0, 20.0, 30.0]), np.array([12.0, 15.0, 30.0]))
    assert check.text() == ("Pods web_forecast (5m ahead) against the load that came: bias +1 (+5.3%), below it "
                            "33.3% of 3 steps")
    assert check.row()["horizonSeconds"] == 300.0


def test_nothing_to_compare_and_no_load():
    e = forecast_error(np.array([NAN, 1.0]), np.array([1.0, NAN]))
    assert (e.steps, e.bias, e.relative_bias, e.below) == (0, None, None, None)
    zero = forecast_error(np.array([1.0, 3.0]), np.array([0.0, 0.0]))
    assert (zero.bias, zero.relative_bias, zero.below) == (2.0, None, 0.0)   # no relative bias over no load
    assert "no step with both" in ForecastCheck("External q_forecast", 60.0, np.array([NAN]), np.array([1.0])).text()
