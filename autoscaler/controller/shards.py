"""Sharding over replicas: membership on coordination.k8s.io/v1 Leases, ownership by rendezvous hashing.

Each replica holds one Lease (`<group>-<identity>`, labelled `promscaler.io/shard-group=<group>`),
renewed as leader election renews its Lease, and watches the others'. An object belongs to the
live member with the highest hash of (member, namespace/name) (rendezvous hashing): a join or a
leave moves about 1/N of the objects and nothing else.

Never two owners at once (docs/operating.md, "Replicas and sharding"):
- a replica acts only while its last successful renewal is younger than `renew_deadline`
  (< `lease_duration`), and only once it sees its own Lease through the watch that shows it the
  others (a watch is ordered: every member that joined before it is then in its view);
- a member leaves the view only when its Lease is deleted: by itself on a graceful stop (after its
  last sync), or by a peer once it was not renewed for `lease_duration`, with a resourceVersion
  precondition, so a late renewal and the expulsion cannot both succeed;
- each replica publishes in its Lease (annotation `promscaler.io/members`) the view it acts on,
  written only after its in-flight syncs of objects it lost under that view have finished; a
  replica acts only when every peer it sees has published a view holding it (its Lease's uid, so
  a rejoin after an expulsion is a new member). Two replicas that see each other cannot both rank
  first for an object, and a peer's published view holding a replica is the peer's promise to
  have let go of what that replica gained.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from promscaler.kubeapi import ApiError, Kube, Obj
from promscaler.times import micro_time

from .apihealth import ApiHealth
from .informers import Informer
from .leases import check_timings, duration_seconds, held_for, leases_path, new_lease, past_deadline, report_failure
from .stopping import wait_or_stop

log = logging.getLogger(__name__)

GROUP_LABEL = "promscaler.io/shard-group"
VIEW_ANNOTATION = "promscaler.io/members"


def score(member: str, namespace: str, name: str) -> int:
    """The member's rendezvous weight for an object: stable across processes (not Python's hash)."""
    digest = hashlib.blake2b(f"{member}\x00{namespace}/{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owner(members: Iterable[str], namespace: str, name: str) -> str | None:
    """The member an object belongs to: the highest weight, ties to the greater identity."""
    return max(members, key=lambda m: (score(m, namespace, name), m), default=None)


def lease_name(group: str, identity: str) -> str:
    """`<group>-<identity>` as a DNS subdomain (identities are `<host>_<uuid>` by default)."""
    clean = re.sub(r"[^a-z0-9.-]+", "-", identity.lower()).strip("-.") or "member"
    return f"{group}-{clean}"[:253].rstrip("-.")


def published_view(lease: Obj) -> dict[str, str]:
    """The view a member last wrote into its Lease: identity -> Lease uid."""
    raw = ((lease.get("metadata") or {}).get("annotations") or {}).get(VIEW_ANNOTATION)
    try:
        view = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in view.items()} if isinstance(view, dict) else {}


def owners(leases: Iterable[Obj], namespace: str, name: str) -> dict[str, tuple[str, int]]:
    """Per shard group in `leases` (members' Leases, any namespace): the member that owns the
    object under the group's current membership, and how many members there are."""
    groups: dict[str, list[str]] = {}
    for lease in leases:
        group = ((lease.get("metadata") or {}).get("labels") or {}).get(GROUP_LABEL)
        holder = (lease.get("spec") or {}).get("holderIdentity")
        if group and holder:
            groups.setdefault(group, []).append(str(holder))
    return {g: (owner(m, namespace, name) or "", len(m)) for g, m in sorted(groups.items())}


class Membership:
    """This replica's Lease, and the live members as the Lease watch shows them.

    `drain` is awaited before a changed view is published: it returns once no sync is in flight
    for an object this replica does not own under the current view. `on_change` is called when
    what this replica may act on may have changed (view, activity)."""

    def __init__(self, kube: Kube, *, namespace: str, group: str, identity: str, lease_duration: float,
                 renew_deadline: float, retry_period: float, drain: Callable[[], Awaitable[None]],
                 on_change: Callable[[], None], health: ApiHealth | None = None,
                 watch_timeout: float = 300.0) -> None:
        check_timings(lease_duration, renew_deadline, retry_period)
        self.kube, self.identity, self.group = kube, identity, group
        self.path = leases_path(namespace)
        self.name = lease_name(group, identity)
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.drain, self.on_change, self.health = drain, on_change, health
        self.leases = Informer(kube, self.path, name="leases", label_selector=f"{GROUP_LABEL}={group}",
                               watch_timeout=watch_timeout, health=health)
        self.leases.add_handler(self._on_lease)
        self.uid: str | None = None          # our Lease's uid while we are a member (our incarnation)
        self._lease: Obj | None = None       # our Lease as last written (its resourceVersion guards the next write)
        self._renewed_at = -1e18             # monotonic time a successful write was sent
        self._published: dict[str, str] = {}
        self._seen: dict[str, tuple[str, float]] = {}  # lease name -> (resourceVersion, first seen at)
        self._wake = asyncio.Event()
        self._last_state: tuple[Any, ...] | None = None
        self._snap: tuple[str | None, dict[str, str], bool] | None = None

    # --- what the watch shows ------------------------------------------------------------------

    def _snapshot(self) -> tuple[dict[str, str], bool]:
        """(live members: identity -> Lease uid, whether we are in our own view and in every peer's
        published view), kept until the next Lease event or change of our uid."""
        if self._snap is None or self._snap[0] != self.uid:
            view, acked = {}, self.uid is not None
            for obj in self.leases.store.values():
                holder = (obj.get("spec") or {}).get("holderIdentity")
                if not holder:
                    continue
                view[str(holder)] = str((obj.get("metadata") or {}).get("uid") or "")
                if holder != self.identity and published_view(obj).get(self.identity) != self.uid:
                    acked = False
            self._snap = (self.uid, view, acked and view.get(self.identity) == self.uid)
        return self._snap[1], self._snap[2]

    def view(self) -> dict[str, str]:
        """Live members: identity -> Lease uid (a member leaves only when its Lease is deleted)."""
        return self._snapshot()[0]

    def active(self) -> bool:
        """May this replica act at all: renewed within the deadline, seen in its own watch, and
        acknowledged by every peer it sees."""
        if self.uid is None or past_deadline(self._renewed_at, self.renew_deadline):
            return False
        return self._snapshot()[1]

    def owns(self, namespace: str, name: str) -> bool:
        """Whether this replica acts on the object now (`active()` and first in rank)."""
        return self.active() and owner(self.view(), namespace, name) == self.identity

    def _on_lease(self, event: str, old: Obj | None, new: Obj | None) -> None:
        """Note when each Lease record was first seen: its expiry counts from then, on our clock."""
        if new is not None:
            meta = new.get("metadata") or {}
            name, rv = str(meta.get("name") or ""), str(meta.get("resourceVersion") or "")
            seen = self._seen.get(name)
            if seen is None or seen[0] != rv:
                self._seen[name] = (rv, time.monotonic())
        self._snap = None
        self._wake.set()

    def _expires_at(self, obj: Obj) -> float | None:
        """When a peer's Lease, unchanged since we saw it, may be expelled (None: ours, or not seen)."""
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        seen = self._seen.get(name)
        if seen is None or seen[0] != str(meta.get("resourceVersion") or ""):
            return None
        if name == self.name and self.uid is not None and meta.get("uid") == self.uid:
            return None
        return seen[1] + held_for(obj.get("spec") or {}, self.lease_duration)

    def _notify_if_changed(self) -> None:
        state = (tuple(sorted(self.view().items())), self.active())
        if state != self._last_state:
            self._last_state = state
            self.on_change()

    # --- the loop ------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Join, renew, publish, expel expired peers; on `stop` leave (delete our Lease)."""
        informer_stop = asyncio.Event()
        informer = asyncio.create_task(self.leases.run(informer_stop))
        try:
            if await wait_or_stop(stop, self.leases.synced.wait()):
                return
            next_renew = 0.0
            while not stop.is_set():
                now = time.monotonic()
                changed = self._changed_view()
                if now >= next_renew or changed:
                    await self._write()
                    next_renew = time.monotonic() + self.retry_period
                await self._expel_expired()
                self._notify_if_changed()
                self._wake.clear()
                now = time.monotonic()  # wake for the next renewal, or the next peer that may expire
                expiries = [t for t in map(self._expires_at, self.leases.store.values()) if t is not None and t > now]
                await wait_or_stop(stop, self._wake.wait(), timeout=max(0.01, min([next_renew, *expiries]) - now))
        except Exception:  # a bug here must not go unseen: we stop renewing, so we stop acting
            log.exception("shard membership failed; leaving the group")
        finally:
            await self._leave()
            informer_stop.set()
            informer.cancel()
            await asyncio.gather(informer, return_exceptions=True)
            self._notify_if_changed()

    def _changed_view(self) -> bool:
        return self.uid is not None and self._peers() != self._published

    def _peers(self) -> dict[str, str]:
        return {k: v for k, v in self.view().items() if k != self.identity}

    async def _write(self) -> None:
        """Create our Lease (joining) or renew it, publishing the view we act on."""
        view = self._peers()
        if self.uid is not None and view != self._published:
            try:  # let go of what we lost before saying we did; a slow sync only delays the news
                await asyncio.wait_for(self.drain(), timeout=self.renew_deadline / 2)
            except TimeoutError:
                view = self._published
        sent, now = time.monotonic(), micro_time()
        annotations = {VIEW_ANNOTATION: json.dumps(view, sort_keys=True, separators=(",", ":"))}
        spec = {"holderIdentity": self.identity, "leaseDurationSeconds": duration_seconds(self.lease_duration),
                "renewTime": now}
        try:
            if self.uid is None or self._lease is None:
                meta = {"name": self.name, "labels": {GROUP_LABEL: self.group}, "annotations": annotations}
                lease = await self.kube.request("POST", self.path, body=new_lease(meta, {**spec, "acquireTime": now}))
                self.uid = str(lease["metadata"]["uid"])
                log.info("joined the shard group %s as %s", self.group, self.identity)
            else:
                meta = {**self._lease["metadata"], "annotations": {
                    **(self._lease["metadata"].get("annotations") or {}), **annotations}}
                lease = await self.kube.request("PUT", f"{self.path}/{self.name}",
                                                body={**self._lease, "metadata": meta,
                                                      "spec": {**self._lease.get("spec", {}), **spec}})
        except ApiError as exc:
            if (exc.not_found or exc.conflict) and self.uid is not None:  # expelled (deleted by a peer): rejoin anew
                log.warning("lost membership of shard group %s: %s", self.group, exc.message or exc.reason)
                self.uid, self._lease, self._published = None, None, {}
            elif exc.conflict:  # a Lease of that name exists: a past incarnation; peers expel it when expired
                log.info("lease %s exists; waiting for it to expire", self.name)
            else:
                log.warning("could not write lease %s: %s", self.name, exc.message or exc.reason)
            return
        except Exception as exc:
            report_failure(log, self.health, f"could not write lease {self.name}", exc)
            return
        self._lease, self._renewed_at, self._published = lease, sent, view

    async def _expel_expired(self) -> None:
        """Delete a peer's Lease not renewed for its duration, as seen on our clock; the
        resourceVersion precondition makes a renewal racing with us win."""
        now = time.monotonic()
        names = set()
        for (_ns, name), obj in list(self.leases.store.items()):
            names.add(name)
            meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
            rv = str(meta.get("resourceVersion") or "")
            expires = self._expires_at(obj)
            if expires is None or now < expires:
                continue
            duration = held_for(spec, self.lease_duration)
            try:
                await self.kube.request("DELETE", f"{self.path}/{name}", body={
                    "apiVersion": "v1", "kind": "DeleteOptions",
                    "preconditions": {"uid": meta.get("uid"), "resourceVersion": rv}})
                log.info("expelled %s from shard group %s: lease not renewed for %.0fs",
                         spec.get("holderIdentity") or name, self.group, duration)
            except ApiError as exc:
                log.debug("could not expel %s: %s", name, exc)
            except Exception as exc:
                report_failure(log, self.health, f"could not expel {name}", exc)
        for name in [n for n in self._seen if n not in names]:
            del self._seen[name]

    async def _leave(self) -> None:
        """Delete our Lease (the controller has finished its syncs): peers take over at once."""
        if self.uid is None or self._lease is None:
            return
        uid, self.uid = self.uid, None
        try:
            await self.kube.request("DELETE", f"{self.path}/{self.name}", body={
                "apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}})
            log.info("left the shard group %s", self.group)
        except Exception as exc:
            log.warning("could not delete lease %s: %s", self.name, exc)
