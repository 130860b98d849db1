"""Real Prometheus servers backfilled (promtool) with the known histories of `data.py` and
`tunedata.py`, one each for the session."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from kubesim.prometheus import PrometheusServer, start_backfilled

from . import data, tunedata


@pytest.fixture(scope="session")
def history() -> Iterator[tuple[PrometheusServer, int]]:
    """(Prometheus, the first step's Unix time): the history ends about an hour ago."""
    start = (int(time.time()) - 3600) // data.STEP * data.STEP
    prom = start_backfilled(data.openmetrics(start))
    yield prom, start
    prom.close()


@pytest.fixture(scope="session")
def tune_history() -> Iterator[tuple[PrometheusServer, int]]:
    """(Prometheus, the first step's Unix time) for `tunedata`: test_tune and the tune report's page."""
    start = tunedata.first_step()
    prom = start_backfilled(tunedata.openmetrics(start))
    yield prom, start
    prom.close()
