"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

A candidate takes the Lease when it is free or when its holder has not renewed it for
`lease_duration` (measured on the candidate's own clock from when it last saw the record
change, so clock skew between nodes does not matter). The leader renews every `retry_period`
and steps down if it cannot renew within `renew_deadline`. On a graceful stop the leader
releases the Lease so a standby takes over at once instead of after `lease_duration`.

(`kubernetes.aio.leaderelection` exists but cannot release on stop and stores times as Python
`str(datetime)`, not RFC 3339 MicroTime; this is the small replacement.)
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from promscaler.kubeapi import ApiError, Kube, Obj
from promscaler.times import micro_time

from .apihealth import ApiHealth
from .leases import check_timings, duration_seconds, held_for, leases_path, new_lease, past_deadline, report_failure
from .stopping import sleep_or_stop

log = logging.getLogger(__name__)


class LeaderElector:
    def __init__(self, kube: Kube, *, namespace: str, name: str, identity: str, lease_duration: float = 15.0,
                 renew_deadline: float = 10.0, retry_period: float = 2.0,
                 on_change: Callable[[bool], None] | None = None, health: ApiHealth | None = None) -> None:
        check_timings(lease_duration, renew_deadline, retry_period)
        self.kube = kube
        self.path = leases_path(namespace)
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.on_change = on_change
        self.health = health
        self.leading = asyncio.Event()
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0

    @property
    def is_leader(self) -> bool:
        return self.leading.is_set()

    def _set(self, leading: bool) -> None:
        if leading == self.leading.is_set():
            return
        if leading:
            self.leading.set()
        else:
            self.leading.clear()
        log.info("%s leadership of lease %s/%s", "acquired" if leading else "lost", self.namespace, self.name)
        if self.on_change is not None:
            self.on_change(leading)

    async def run(self, stop: asyncio.Event) -> None:
        """Campaign, lead, and on `stop` release the Lease if held."""
        try:
            while not stop.is_set():
                if not self.is_leader:
                    if await self._try():
                        self._set(True)
                        last_renew = time.monotonic()
                    elif await sleep_or_stop(stop, self.retry_period * (1 + 0.2 * random.random())):
                        break
                    continue
                if await sleep_or_stop(stop, self.retry_period):
                    break
                if await self._try():
                    last_renew = time.monotonic()
                elif past_deadline(last_renew, self.renew_deadline):
                    self._set(False)
        finally:
            if self.is_leader:
                await self._release()
                self._set(False)

    async def _try(self) -> bool:
        """One attempt to acquire or renew; True when we hold the Lease afterwards."""
        now = datetime.now(UTC)
        try:
            lease = await self.kube.get(f"{self.path}/{self.name}")
        except ApiError as exc:
            if not exc.not_found:
                log.warning("error retrieving lease %s/%s: %s", self.namespace, self.name, exc)
                return False
            spec = self._spec(now, now, 0)
            body = new_lease({"name": self.name, "namespace": self.namespace}, spec)
            try:
                await self.kube.request("POST", self.path, body=body)
            except ApiError as exc2:
                log.info("could not create lease: %s", exc2)
                return False
            self._observe(spec)
            return True
        except Exception as exc:  # network: count as a failed renew
            self._network_error("error retrieving lease", exc)
            return False
        spec = lease.get("spec") or {}
        self._observe(spec)
        holder = spec.get("holderIdentity") or ""
        expires = self._observed_at + held_for(spec, self.lease_duration)
        if holder and holder != self.identity and expires > time.monotonic():
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder == self.identity:
            acquire = spec.get("acquireTime") or micro_time(now)
        else:
            acquire, transitions = micro_time(now), transitions + 1
        new_spec = self._spec(now, acquire, transitions)
        try:
            await self.kube.request("PUT", f"{self.path}/{self.name}", body={**lease, "spec": new_spec})
        except ApiError as exc:
            log.debug("could not update lease: %s", exc)
            return False
        except Exception as exc:
            self._network_error("could not update lease", exc)
            return False
        self._observe(new_spec)
        return True

    def _network_error(self, what: str, exc: Exception) -> None:
        report_failure(log, self.health, f"{what} {self.namespace}/{self.name}", exc)

    def _spec(self, now: datetime, acquire: datetime | str, transitions: int) -> Obj:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": duration_seconds(self.lease_duration),
            "acquireTime": acquire if isinstance(acquire, str) else micro_time(acquire),
            "renewTime": micro_time(now),
            "leaseTransitions": transitions,
        }

    def _observe(self, spec: Obj) -> None:
        record = (
            spec.get("holderIdentity"),
            spec.get("renewTime"),
            spec.get("acquireTime"),
            spec.get("leaseDurationSeconds"),
        )
        if record != self._observed:
            self._observed, self._observed_at = record, time.monotonic()

    async def _release(self) -> None:
        """Give the Lease up so a standby need not wait for it to expire."""
        try:
            lease = await self.kube.get(f"{self.path}/{self.name}")
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            now = micro_time()
            released = {**spec, "holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": now, "acquireTime": now}
            await self.kube.request("PUT", f"{self.path}/{self.name}", body={**lease, "spec": released})
            log.info("released lease %s/%s", self.namespace, self.name)
        except Exception as exc:
            log.warning("could not release lease %s/%s: %s", self.namespace, self.name, exc)
