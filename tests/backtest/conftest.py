"""A real Prometheus backfilled with the known history of `data.py` (promtool), for the session."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from kubesim.prometheus import PrometheusServer, start_backfilled

from . import data


@pytest.fixture(scope="session")
def history() -> Iterator[tuple[PrometheusServer, int]]:
    """(Prometheus, the first step's Unix time): the history ends about an hour ago."""
    start = (int(time.time()) - 3600) // data.STEP * data.STEP
    prom = start_backfilled(data.openmetrics(start))
    yield prom, start
    prom.close()
