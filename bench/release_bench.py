"""How soon a new or changed autoscaler is synced, as Kubernetes 1.36's HPA controller and as 1.37's.

kube-controller-manager 1.36 queued every add and update a resync period ahead (its queue's
AddRateLimited); 1.37 syncs a new autoscaler, and one whose spec changed, at once
(kubernetes#138294). For each release, KubeSim serves as that release and the controller, in
this process with its defaults (15 s period), follows it (read from /version). `--autoscalers`
HorizontalAutoscalers are created one after another, then each one's spec is changed at a random
moment of its period; measured, per autoscaler: from the write to the end of the first sync after
it (p50, max), and the syncs deferred because the cache had not seen the controller's own status
write (1.37).

    .venv/bin/python bench/release_bench.py [--autoscalers 20] [--period 15]

Writes bench/results/release.json and prints the table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autoscaler.controller.controller import Controller, Settings  # noqa: E402
from autoscaler.controller.reconcile import CR  # noqa: E402
from kubesim.apiserver import KubeSim  # noqa: E402
from promscaler.kubeapi import Kube, load_configuration  # noqa: E402

API = ("promscaler.io/v1alpha1", "HorizontalAutoscaler")
NS = "default"


def deployment(name: str) -> dict:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                         {"name": "app", "image": "app:1", "resources": {"requests": {"cpu": "100m"}}}]}}}}


def autoscaler(name: str, max_replicas: int) -> dict:
    return {"apiVersion": API[0], "kind": API[1], "metadata": {"name": name, "namespace": NS},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                     "minReplicas": 1, "maxReplicas": max_replicas,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                         "type": "Utilization", "averageUtilization": 80}}}]}}


def _summary(waits: list[float]) -> dict[str, float]:
    return {"p50_s": round(statistics.median(waits), 3), "max_s": round(max(waits), 3)}


async def measure(release: str, count: int, period: float) -> dict:
    with KubeSim(ready_delay=0.0, kube_version=release) as sim:
        names = [f"web-{i}" for i in range(count)]
        for name in names:
            sim.apply(deployment(name))
        kube = Kube(await load_configuration(sim.kubeconfig_path))
        controller = Controller(kube, Settings(sync_period=period, leader_elect=False, http_port=None))
        synced: dict[str, list[float]] = {name: [] for name in names}
        sync = controller.reconciler.sync

        async def timed(key):  # the end of each sync, per autoscaler
            try:
                return await sync(key)
            finally:
                if key[0] == CR and key[2] in synced:
                    synced[key[2]].append(time.monotonic())

        controller.reconciler.sync = timed
        stop = asyncio.Event()
        task = asyncio.create_task(controller.run(stop))
        try:
            while not controller.ready():
                await asyncio.sleep(0.01)

            async def first_sync_after(name: str, since: float) -> float:
                while not any(t > since for t in synced[name]):
                    await asyncio.sleep(0.005)
                return next(t for t in synced[name] if t > since) - since

            created = []
            for name in names:  # one after another, as an operator applies them
                at = time.monotonic()
                sim.apply(autoscaler(name, 5))
                created.append(asyncio.create_task(first_sync_after(name, at)))
                await asyncio.sleep(period / count / 4)
            create_waits = await asyncio.gather(*created)

            rng = random.Random(1)
            changed = []
            for name in names:  # a spec change at a random moment of the autoscaler's period
                await asyncio.sleep(rng.uniform(0, period / count))
                at = time.monotonic()
                sim.apply(autoscaler(name, 6))
                changed.append(asyncio.create_task(first_sync_after(name, at)))
            change_waits = await asyncio.gather(*changed)
            skips = sum(s.value for m in controller.telemetry.stale_skips.collect() for s in m.samples
                        if s.name.endswith("_total"))
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)
            await kube.close()
    return {"release": release, "autoscalers": count, "period_s": period,
            "created_to_first_sync": _summary(create_waits), "spec_change_to_sync": _summary(change_waits),
            "stale_sync_skips": skips}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--autoscalers", type=int, default=20)
    ap.add_argument("--period", type=float, default=15.0)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "release.json"))
    args = ap.parse_args()
    rows = [asyncio.run(measure(release, args.autoscalers, args.period)) for release in ("1.36", "1.37")]
    print(f"{'release':8} {'created -> first sync p50 / max':34} {'spec change -> sync p50 / max':32} stale skips")
    for r in rows:
        c, s = r["created_to_first_sync"], r["spec_change_to_sync"]
        print(f"{r['release']:8} {c['p50_s']:>10.3f} s / {c['max_s']:<8.3f} s{'':10} "
              f"{s['p50_s']:>10.3f} s / {s['max_s']:<8.3f} s{'':8} {r['stale_sync_skips']:.0f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
