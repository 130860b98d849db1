"""An API server outage: the API server stops (connections refused) and comes back on the same
address. The controller logs one warning per retry for all autoscalers together (with backoff),
no tracebacks, and resumes by itself."""

from __future__ import annotations

import asyncio
import logging

from .conftest import NS, autoscaler, deployment, eventually, pods_metric, replicas, running, settings
from .test_reconcile import per_pod


async def test_outage_is_one_warning_per_retry_and_recovers_by_itself(sim, fake, caplog):
    names = ("web", "api", "jobs")
    for name in names:
        sim.apply(deployment(name, 2))
        fake.pods[(NS, f"{name}_requests")] = per_pod(2000)  # 4 pods at 500m each
        sim.apply(autoscaler(name, name, [pods_metric(f"{name}_requests", "500m")]))
    caplog.set_level(logging.DEBUG, logger="autoscaler")
    async with running(sim, settings(sync_period=0.3, workers=3)) as controller:
        await eventually(lambda: all(replicas(sim, n) == 4 for n in names))
        start = len(caplog.records)
        await asyncio.to_thread(sim.stop)  # the API server goes away: connections are refused
        await eventually(lambda: controller.health.retries >= 2, timeout=20)
        assert not controller.health.up.is_set()
        for name in names:
            fake.pods[(NS, f"{name}_requests")] = per_pod(3000)  # meanwhile the load grew: 6 pods each
        await asyncio.to_thread(sim.start)  # back, same address, same objects
        await eventually(lambda: controller.health.up.is_set(), timeout=40)
        await eventually(lambda: all(replicas(sim, n) == 6 for n in names), timeout=20)
        assert controller.health.outages == 1
    during = [r for r in caplog.records[start:] if r.name.startswith("autoscaler")]  # not the sandbox's own logs
    assert not [r for r in during if r.exc_info], "no tracebacks"
    warnings = [r for r in during if r.levelno >= logging.WARNING]
    assert all(r.name == "autoscaler.controller.apihealth" for r in warnings), [r.getMessage() for r in warnings]
    assert len(warnings) == controller.health.retries  # the first report, then one per failed retry
    assert warnings[0].getMessage().startswith("API server unavailable")
    assert [r.getMessage() for r in during if "available again" in r.getMessage()]
