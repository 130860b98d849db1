"""Sharding over replicas: real `promscaler-autoscaler run --sharding` processes against KubeSim.
Three replicas share the autoscalers; one is killed with SIGKILL, one is added, one stops
gracefully. Every write (status, /scale, events) is counted from the API server's audit log,
each replica authenticating as its own user, so the counts do not depend on the controller's
own reports."""

from __future__ import annotations

import io
import itertools
import json
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from autoscaler.controller.controller import Controller
from autoscaler.controller.shards import lease_name, owner
from autoscaler.explain.cli import main as explain_main
from kubesim.apiserver import KubeSim
from kubesim.kubeconfig import write_kubeconfig
from kubesim.processes import ControllerProcess
from promscaler.times import parse_time

from ..support import wait_for
from .conftest import NS, ROOT, autoscaler, deployment, eventually, metrics_upstream, pods_metric, sharded
from .test_reconcile import per_pod

COUNT = 30
LEASE_S, RENEW_S, RETRY_S, SYNC_S = 4.0, 3.0, 0.5, 2.0
FLAGS = ("--sharding", "--horizontal-pod-autoscaler-sync-period", f"{SYNC_S:g}s",
         "--leader-elect-lease-duration", f"{LEASE_S:g}s", "--leader-elect-renew-deadline", f"{RENEW_S:g}s",
         "--leader-elect-retry-period", f"{RETRY_S * 1000:g}ms", "--leader-elect-resource-namespace", NS,
         "--horizontal-pod-autoscaler-downscale-stabilization", "0s")
WRITES = ("create", "update", "patch")

Write = tuple[str, str, float]  # (autoscaler, replica user, time the API server committed it)


def writes(sim: KubeSim, since: float = 0.0) -> list[Write]:
    """Successful writes by the replicas to an autoscaler's status, its target's /scale, or an
    Event about it, in the order the API server committed them."""
    out = []
    for e in list(sim.audit or ()):
        ref, user = e["objectRef"], e["user"]["username"] or ""
        if e["verb"] not in WRITES or e["responseStatus"]["code"] >= 300 or not user.startswith("replica-"):
            continue
        if ref["resource"] == "horizontalautoscalers" or (ref["resource"], ref.get("subresource")) == (
                "deployments", "scale"):
            name = ref["name"]
        elif ref["resource"] == "events":
            involved = (e.get("requestObject") or {}).get("involvedObject") or {}
            name = involved.get("name") or ref["name"].rsplit(".", 1)[0]
        else:
            continue
        at = parse_time(e["stageTimestamp"]).timestamp()
        if at >= since:
            out.append((name, user, at))
    return out


def lease_writes(sim: KubeSim, verbs: tuple[str, ...]) -> list[tuple[str, str, str, float]]:
    """(verb, user, lease name, time) of successful Lease writes."""
    return [(e["verb"], e["user"]["username"], e["objectRef"].get("name") or "",
             parse_time(e["stageTimestamp"]).timestamp())
            for e in list(sim.audit or ()) if e["objectRef"]["resource"] == "leases" and e["verb"] in verbs
            and e["responseStatus"]["code"] < 300]


def writers(ws: list[Write]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for name, user, _ in ws:
        out[name].append(user)
    return out


def owners_since(sim: KubeSim, since: float, names: list[str], times: int = 3) -> dict[str, str] | None:
    """Each autoscaler's one writer once each has been written `times` times since `since` (None before)."""
    per = writers(writes(sim, since))
    if any(len(per.get(n, ())) < times for n in names):
        return None
    assert all(len(set(per[n])) == 1 for n in names), {n: set(per[n]) for n in names if len(set(per[n])) > 1}
    return {n: per[n][0] for n in names}


def unwritten(sim: KubeSim, since: float, names: list[str], times: int = 3) -> dict[str, list[str]]:
    """For a failure message: the autoscalers written fewer than `times` times since `since`, and by whom."""
    per = writers(writes(sim, since))
    return {n: per.get(n, []) for n in names if len(per.get(n, ())) < times}


def members_seen(replica: ControllerProcess) -> int:
    """Live members on the replica's /metrics, once it may act (0 before)."""
    text = replica.metrics()
    if "promscaler_autoscaler_shard_active 1.0" not in text:
        return 0
    return sum(1 for line in text.splitlines() if line.startswith("promscaler_autoscaler_shard_member{"))


@pytest.fixture
def audited() -> Iterator[KubeSim]:
    with KubeSim(ready_delay=0.0, audit=True) as sim:
        sim.apply(yaml.safe_load((ROOT / "apiservice/horizontalautoscaler-crd.yaml").read_text()))
        yield sim


def test_replicas_share_the_autoscalers_and_hand_them_over_without_two_writers(audited: KubeSim, tmp_path: Path):
    sim = audited
    names = [f"app-{i}" for i in range(COUNT)]
    for name in names:
        sim.apply(deployment(name, 2))
        sim.apply(autoscaler(name, name, [pods_metric("load", "500m")]))
    replicas: dict[str, ControllerProcess] = {}

    def start(user: str) -> ControllerProcess:
        sim.tokens[f"token-{user}"] = {"username": user, "uid": user, "groups": ["system:masters"]}
        kubeconfig = write_kubeconfig(tmp_path / f"{user}.kubeconfig", sim.url, f"token-{user}")
        replicas[user] = ControllerProcess(kubeconfig, *FLAGS)
        return replicas[user]

    def agreed(live: list[str]) -> bool:
        return all(members_seen(replicas[u]) == len(live) for u in live)

    counter = itertools.count()
    with metrics_upstream(sim) as fake:
        # 500m..539m per pod against a 500m target: within the 10% tolerance (no scaling), but a new
        # current value at every sync, so every sync writes status
        fake.pods[(NS, "load")] = lambda pods: f"{500 + next(counter) % 40}m"
        try:
            for user in ("replica-a", "replica-b", "replica-c"):
                start(user)
            for p in replicas.values():
                p.wait_ready()
            live = ["replica-a", "replica-b", "replica-c"]
            assert wait_for(lambda: agreed(live), timeout=30), {u: replicas[u].metrics() for u in live}

            # three members: each autoscaler has one writer, and all three have a share
            steady = datetime.now().timestamp()
            first = wait_for(lambda: owners_since(sim, steady, names), timeout=60)
            assert first is not None, unwritten(sim, steady, names)
            assert set(first.values()) == set(live), first

            # SIGKILL: its autoscalers go to the others once its Lease expired, and nothing else moves
            replicas["replica-c"].kill()
            killed_at = datetime.now().timestamp()
            orphans = [n for n in names if first[n] == "replica-c"]
            live = ["replica-a", "replica-b"]

            def taken_over() -> dict[str, Write] | None:
                ws = writes(sim, killed_at)
                firsts = {n: next((w for w in ws if w[0] == n and w[1] != "replica-c"), None) for n in orphans}
                return firsts if all(firsts.values()) else None  # type: ignore[return-value]

            takeover = wait_for(taken_over, timeout=LEASE_S + SYNC_S + 20)
            assert takeover is not None, writers(writes(sim, killed_at))
            renewed = max(t for verb, user, _, t in lease_writes(sim, ("create", "update")) if user == "replica-c")
            for name, (_, user, at) in takeover.items():
                assert user in live
                # no one acted on the killed replica's autoscalers while its Lease could still be valid,
                assert at > renewed + LEASE_S, (name, at - renewed)
            # and all were taken over (by design within the lease duration plus a sync period; how long
            # it takes is bench/controller_bench.py's failover figure, not a timed assertion here)
            assert wait_for(lambda: agreed(live), timeout=30)
            after_kill = datetime.now().timestamp()
            second = wait_for(lambda: owners_since(sim, after_kill, names), timeout=60)
            assert second is not None, unwritten(sim, after_kill, names)
            assert {n: second[n] for n in names if n not in orphans} == {n: first[n] for n in names if n not in orphans}

            # a fourth replica joins: it takes a share, from both, and nothing else moves
            start("replica-d").wait_ready()
            live = ["replica-a", "replica-b", "replica-d"]
            assert wait_for(lambda: agreed(live), timeout=30), {u: replicas[u].metrics() for u in live}
            joined = datetime.now().timestamp()
            third = wait_for(lambda: owners_since(sim, joined, names), timeout=60)
            assert third is not None, unwritten(sim, joined, names)
            moved = {n: (second[n], third[n]) for n in names if second[n] != third[n]}
            assert moved and all(new == "replica-d" for _, new in moved.values()), moved
            assert 0 < len(moved) < COUNT

            # explain names the replica the API server sees writing (the audit: which user created
            # which member's Lease)
            identity = {(e.get("requestObject") or {}).get("spec", {}).get("holderIdentity"): e["user"]["username"]
                        for e in list(sim.audit or ()) if e["objectRef"]["resource"] == "leases"
                        and e["verb"] == "create"}
            for name in names[:3]:
                out = io.StringIO()
                assert explain_main([name, "-n", NS, "--kubeconfig", str(tmp_path / "replica-a.kubeconfig"),
                                     "-o", "json"], stdout=out) == 0
                (owned,) = json.loads(out.getvalue())["ownedBy"]
                assert (owned["shardGroup"], owned["members"]) == ("promscaler-autoscaler", 3)
                assert identity[owned["replica"]] == third[name], (name, owned)

            # a graceful stop deletes the Lease: the others take over without waiting for it to expire
            mine = [n for n in names if third[n] == "replica-a"]
            replicas["replica-a"].stop()
            own = {lease for _, user, lease, _ in lease_writes(sim, ("create",)) if user == "replica-a"}
            left = [t for _, user, lease, t in lease_writes(sim, ("delete",)) if user == "replica-a" and lease in own]
            assert len(left) == 1
            handed = wait_for(lambda: owners_since(sim, left[0], mine, times=1), timeout=10)
            assert handed is not None and set(handed.values()) <= {"replica-b", "replica-d"}, handed
            first_after = min(t for n, u, t in writes(sim, left[0]) if n in mine)
            assert first_after - left[0] < LEASE_S
        finally:
            for p in replicas.values():
                p.stop()

    # over the whole run: between two membership changes (a Lease created or deleted), each
    # autoscaler went from at most one writer to at most one other, never back and forth
    changes = sorted(t for _, _, _, t in lease_writes(sim, ("create", "delete")))
    epochs: dict[tuple[str, int], list[str]] = defaultdict(list)
    for name, user, at in writes(sim):
        epoch = sum(1 for t in changes if t <= at)
        runs = epochs[(name, epoch)]
        if not runs or runs[-1] != user:
            runs.append(user)
    interleaved: dict[Any, list[str]] = {k: v for k, v in epochs.items() if len(v) > 2}
    assert not interleaved, interleaved


def test_rendezvous_hashing_moves_only_what_a_join_or_leave_must():
    """Rendezvous hashing's documented property: removing a member moves exactly its objects,
    adding one moves objects only to it, about 1/N of them."""
    objects = [(f"ns-{i % 7}", f"app-{i}") for i in range(2000)]
    five = [f"host_{i}" for i in range(5)]
    before = {o: owner(five, *o) for o in objects}
    assert set(before.values()) == set(five)
    four = five[:4]
    after_leave = {o: owner(four, *o) for o in objects}
    assert {o for o in objects if after_leave[o] != before[o]} == {o for o in objects if before[o] == "host_4"}
    six = [*five, "host_5"]
    after_join = {o: owner(six, *o) for o in objects}
    moved = [o for o in objects if after_join[o] != before[o]]
    assert all(after_join[o] == "host_5" for o in moved)
    assert 0.12 < len(moved) / len(objects) < 0.22  # 1/6, within five standard deviations
    assert owner(list(reversed(six)), "ns-1", "app-1") == after_join[("ns-1", "app-1")]  # order does not matter


def test_member_lease_names_are_dns_subdomains():
    assert lease_name("promscaler-autoscaler", "node-1_3f2a-B") == "promscaler-autoscaler-node-1-3f2a-b"
    assert len(lease_name("g", "x" * 400)) == 253


async def test_shadow_mode_shards_native_hpas_and_autoscalers_alike(sim, fake):
    """In shadow mode with --reconcile-native-hpas, HPAs are shared out like HorizontalAutoscalers:
    each synced by one replica only, and each replica exports (and counts) only its own."""
    fake.pods[(NS, "load")] = per_pod(1000)
    names = [f"app-{i}" for i in range(8)]
    for name in names:
        sim.apply(deployment(name, 2))
        sim.apply(autoscaler(name, name, [pods_metric("load", "500m")], kind="HorizontalPodAutoscaler"))
        sim.apply(autoscaler(name, name, [pods_metric("load", "500m")]))
    synced: list[dict[tuple[str, str, str], int]] = [defaultdict(int), defaultdict(int)]

    def count_syncs(controllers: list[Controller]) -> None:
        for c, counts in zip(controllers, synced, strict=True):
            def counting(key, sync=c.reconciler.sync, counts=counts):
                counts[key] += 1
                return sync(key)
            c.reconciler.sync = counting  # type: ignore[method-assign]

    async with sharded(sim, ("r0", "r1"), count_syncs, dry_run=True, reconcile_native_hpas=True) as controllers:
        before = [dict(s) for s in synced]
        keys = {(kind, NS, n) for kind in ("HorizontalAutoscaler", "HorizontalPodAutoscaler") for n in names}
        await eventually(lambda: all(sum(s.get(k, 0) - b.get(k, 0) for s, b in zip(synced, before, strict=True)) >= 3
                                     for k in keys), timeout=30)
        mine = [{k for k in keys if s.get(k, 0) > b.get(k, 0)} for s, b in zip(synced, before, strict=True)]
        assert not mine[0] & mine[1] and mine[0] | mine[1] == keys and mine[0] and mine[1]
        for own, c in zip(mine, controllers, strict=True):
            assert own == c.owned
            shadowed = {lab for lab in own if lab[0] == "HorizontalPodAutoscaler"}
            value = c.telemetry.registry.get_sample_value
            assert value("promscaler_autoscaler_shard_owned_objects", {"kind": "HorizontalPodAutoscaler"}) == len(
                shadowed)
            for _, ns, name in shadowed:
                assert value("promscaler_autoscaler_shadow_desired_replicas",
                             {"namespace": ns, "name": name, "source": "promscaler"}) == 2.0
            for _, ns, name in keys - own:
                assert value("promscaler_autoscaler_shadow_desired_replicas",
                             {"namespace": ns, "name": name, "source": "promscaler"}) is None
