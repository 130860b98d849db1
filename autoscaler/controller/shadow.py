"""Shadow mode (`--dry-run --reconcile-native-hpas`): decide beside the cluster's HPA controller,
write nothing, and compare honestly.

- What really happened feeds the decision: the scale events that `behavior` policies count are the
  real HPA's (each new `status.lastScaleTime` with its `currentReplicas -> desiredReplicas`), not
  the shadow's would-be scalings; a shadow that starts while the real HPA is scaling down does not
  seed its stabilization window with a size the real HPA has already left.
- Each shadow decision is compared with the real HPA's decision for the same sync: its next status
  update after the shadow's sync; if none comes before the shadow's next sync, the real HPA's status
  held, and that is its decision.
- "The same sync" is made literal: the shadow locks onto the real HPA's phase (its status updates
  arrive every sync period) and syncs each HPA just before the real one does (`LEAD`), deciding as of
  the real sync's time (plus `LATE`, the positive drift of a controller that re-queues after each
  sync). So both read the same metrics and see the same policy periods and stabilization windows;
  otherwise a shadow a few seconds out of phase disagrees at every policy boundary.
- Counters per HPA, a histogram of the difference, a log line only for a disagreement that outlives
  one sync period (both explanations side by side), and a summary for `/debug/shadow`.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from autoscaler.decision import record_scale
from autoscaler.decision.model import Decision, History, Recommendation
from promscaler.kubeapi import Obj
from promscaler.times import parse_time

log = logging.getLogger(__name__)

Key = tuple[str, str, str]  # (kind, namespace, name)
SUMMARY_WINDOW = timedelta(hours=1)


def lead(period: float) -> float:
    """How long before the real HPA's predicted sync the shadow syncs (reads metrics and scale)."""
    return min(0.5, period / 5)


def late(period: float) -> float:
    """How far after the predicted real sync the shadow's decision is dated."""
    return min(0.25, period / 10)


@dataclass(frozen=True, slots=True)
class Comparison:
    at: datetime            # the shadow's sync
    ours: int
    theirs: int
    our_reasons: tuple[str, ...]
    their_reasons: tuple[str, ...]

    @property
    def agree(self) -> bool:
        return self.ours == self.theirs


@dataclass(slots=True)
class _Pending:
    at: datetime            # the decision's time (the real HPA's predicted sync)
    synced: datetime        # when the shadow actually synced
    decision: Decision


@dataclass(slots=True)
class _Hpa:
    """What the shadow knows of one real HPA."""

    events: History                       # the real HPA's scale events (recommendations unused)
    last_scale: str | None = None         # status.lastScaleTime last recorded
    scaled_down_at: datetime | None = None  # when the real HPA last scaled down
    anchor: datetime | None = None        # when a status update of the real HPA (one of its syncs) was seen
    pending: _Pending | None = None
    streak: int = 0                       # disagreements in a row
    streak_since: datetime | None = None
    logged: bool = False
    compared: deque[Comparison] | None = None


def real_reasons(status: Obj) -> tuple[str, ...]:
    """The real HPA's explanation: its conditions, as `kubectl describe hpa` shows them."""
    return tuple(f"{c.get('type')} {c.get('status')} {c.get('reason')}: {c.get('message', '')}"
                 for c in status.get("conditions") or ())


class ShadowBook:
    def __init__(self, registry: CollectorRegistry, *, sync_period: float,
                 on_compared: Callable[[Key, int, int], None] = lambda key, ours, theirs: None,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.sync_period = sync_period
        self.on_compared = on_compared
        self.clock = clock
        self.hpas: dict[Key, _Hpa] = {}
        self.decisions = Counter("promscaler_shadow_decisions",
                                 "Shadow decisions compared with the cluster HPA's decision for the same sync.",
                                 ["namespace", "name", "agree"], registry=registry)
        self.difference = Histogram("promscaler_shadow_replica_difference",
                                    "promscaler's desired replicas minus the cluster HPA's, per compared decision.",
                                    buckets=(-10, -5, -3, -2, -1, 0, 1, 2, 3, 5, 10), registry=registry)

    def _hpa(self, key: Key) -> _Hpa:
        hpa = self.hpas.get(key)
        if hpa is None:
            hpa = self.hpas[key] = _Hpa(History(()), compared=deque())
        return hpa

    # --- what the real HPA does (informer events) --------------------------------------------

    def observe(self, key: Key, old: Obj | None, new: Obj | None) -> None:
        """An HPA event from the watch: record its scale events, resolve a pending comparison."""
        if new is None:
            self.forget(key)
            return
        status = new.get("status") or {}
        if old is not None and (old.get("status") or {}) == status:
            return
        now = self.clock()
        hpa = self._hpa(key)
        self._record_scale(hpa, status, now, prompt=old is not None)
        if old is not None:
            hpa.anchor = now
            if hpa.pending is not None and now > hpa.pending.synced:
                self._resolve(key, hpa, status)

    def _record_scale(self, hpa: _Hpa, status: Obj, now: datetime, *, prompt: bool) -> None:
        stamp = status.get("lastScaleTime")
        if not stamp or stamp == hpa.last_scale:
            return
        hpa.last_scale = stamp
        current, desired = int(status.get("currentReplicas") or 0), int(status.get("desiredReplicas") or 0)
        if current == desired:
            return
        try:
            at = parse_time(stamp)
        except ValueError:
            return
        # lastScaleTime has whole seconds: when seen at once, the scale happened at our observation
        # (clamped into that second); seen later (at start), count it as late in its second.
        latest = at + timedelta(milliseconds=999)
        at = max(at, min(now, latest)) if prompt else latest
        hpa.events = record_scale(hpa.events, at, current, desired)
        if desired < current:
            hpa.scaled_down_at = at

    # --- the shadow's side (reconcile) -------------------------------------------------------

    def _next_real(self, hpa: _Hpa, after: datetime) -> datetime | None:
        """The real HPA's first predicted sync at or after `after` (None until one was seen)."""
        if hpa.anchor is None:
            return None
        period = timedelta(seconds=self.sync_period)
        n = max(0, -((hpa.anchor - after) // period))  # ceil((after - anchor) / period)
        return hpa.anchor + n * period

    def decision_time(self, key: Key, now: datetime) -> datetime:
        """The time the shadow decides as of: the real HPA's next sync (plus LATE), else now."""
        real = self._next_real(self._hpa(key), now)
        return now if real is None else real + timedelta(seconds=late(self.sync_period))

    def next_delay(self, key: Key) -> float:
        """Seconds until this HPA's next shadow sync: LEAD before the real sync after the next half period."""
        hpa = self.hpas.get(key)
        if hpa is None:
            return self.sync_period
        now = self.clock()
        ahead = lead(self.sync_period)
        real = self._next_real(hpa, now + timedelta(seconds=self.sync_period / 2 + ahead))
        if real is None:
            return self.sync_period
        return max(0.0, (real - now).total_seconds() - ahead)

    def history(self, key: Key, own: History | None, now: datetime, downscale_window: float) -> History:
        """The history the shadow decides with: its own recommendations, the real scale events.

        On the first sync, the stabilization window is seeded from reality: with the current size
        (as a restarted HPA controller does), unless the real HPA scaled down within the window, in
        which case its window held nothing above the size it went to and nothing is seeded."""
        hpa = self._hpa(key)
        if own is not None and own.recommendations is not None:
            recommendations: tuple[Recommendation, ...] | None = own.recommendations
        elif hpa.scaled_down_at is not None and (now - hpa.scaled_down_at).total_seconds() < downscale_window:
            recommendations = ()
        else:
            recommendations = None  # the engine records the current size at now
        return History(recommendations, hpa.events.scale_up_events, hpa.events.scale_down_events)

    def decided(self, key: Key, decision: Decision, at: datetime, synced: datetime, status: Obj) -> None:
        """The shadow decided as of `at` (synced at `synced`); the real HPA's answer is its next status."""
        hpa = self._hpa(key)
        if hpa.pending is not None:  # no status update came in a whole sync: the real HPA's status held
            self._resolve(key, hpa, status)
        hpa.pending = _Pending(at, synced, decision)

    def _resolve(self, key: Key, hpa: _Hpa, status: Obj) -> None:
        pending, hpa.pending = hpa.pending, None
        assert pending is not None
        if status.get("desiredReplicas") is None:
            return  # the real HPA has not decided anything yet
        theirs = int(status["desiredReplicas"])
        ours = pending.decision.desired_replicas
        _, ns, name = key
        agree = ours == theirs
        self.decisions.labels(ns, name, "true" if agree else "false").inc()
        self.difference.observe(ours - theirs)
        self.on_compared(key, ours, theirs)
        reasons = tuple(pending.decision.explanation) if not agree else ()
        comparison = Comparison(pending.at, ours, theirs, reasons, real_reasons(status) if not agree else ())
        assert hpa.compared is not None
        hpa.compared.append(comparison)
        cutoff = pending.at - SUMMARY_WINDOW
        while hpa.compared and hpa.compared[0].at < cutoff:
            hpa.compared.popleft()
        if agree:
            if hpa.logged:
                log.info("shadow agrees again with HPA %s/%s: %d replicas", ns, name, ours,
                         extra={"namespace": ns, "autoscaler": name, "desired": ours})
            hpa.streak, hpa.streak_since, hpa.logged = 0, None, False
            return
        hpa.streak += 1
        if hpa.streak_since is None:
            hpa.streak_since = pending.at
        persisted = (pending.at - hpa.streak_since).total_seconds() >= self.sync_period * 0.9 and hpa.streak > 1
        if persisted and not hpa.logged:
            hpa.logged = True
            log.warning("shadow disagrees with HPA %s/%s for %d decisions since %s: promscaler %d, cluster HPA %d",
                        ns, name, hpa.streak, hpa.streak_since.strftime("%H:%M:%S"), ours, theirs,
                        extra={"namespace": ns, "autoscaler": name, "promscaler_desired": ours,
                               "cluster_desired": theirs, "promscaler_explanation": list(comparison.our_reasons),
                               "cluster_explanation": list(comparison.their_reasons)})

    def forget(self, key: Key) -> None:
        if self.hpas.pop(key, None) is None:
            return
        for agree in ("true", "false"):
            with contextlib.suppress(KeyError):
                self.decisions.remove(key[1], key[2], agree)

    # --- the summary -------------------------------------------------------------------------

    def summary(self, now: datetime | None = None) -> dict[str, Any]:
        """Over the last hour: decisions compared, agreements, and every disagreement."""
        now = now or self.clock()
        cutoff = now - SUMMARY_WINDOW
        total = agreed = 0
        disagreements: list[dict[str, Any]] = []
        per_hpa: list[dict[str, Any]] = []
        for (_, ns, name), hpa in sorted(self.hpas.items()):
            recent = [c for c in hpa.compared or () if c.at >= cutoff]
            ok = sum(1 for c in recent if c.agree)
            total, agreed = total + len(recent), agreed + ok
            per_hpa.append({"namespace": ns, "name": name, "decisions": len(recent), "agreed": ok})
            disagreements += [{"namespace": ns, "name": name, "at": c.at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                               "promscaler": c.ours, "cluster": c.theirs, "promscaler_explanation": list(c.our_reasons),
                               "cluster_explanation": list(c.their_reasons)} for c in recent if not c.agree]
        disagreements.sort(key=lambda d: d["at"])
        return {"window_seconds": int(SUMMARY_WINDOW.total_seconds()), "decisions": total, "agreed": agreed,
                "disagreements": disagreements, "autoscalers": per_hpa}


def render_summary(summary: dict[str, Any], limit: int = 50) -> str:
    """The summary as text for people."""
    n, m, bad = summary["agreed"], summary["decisions"], summary["disagreements"]
    head = f"agreed on {n} of {m} decisions over the last hour"
    lines = [head + (f"; the {len(bad)} disagreements were:" if bad else "")]
    for d in bad[-limit:]:
        lines.append(f"- {d['at']} {d['namespace']}/{d['name']}: "
                     f"promscaler {d['promscaler']}, cluster HPA {d['cluster']}")
        lines += [f"    promscaler:  {r}" for r in d["promscaler_explanation"]]
        lines += [f"    cluster HPA: {r}" for r in d["cluster_explanation"]]
    if len(bad) > limit:
        lines.append(f"({len(bad) - limit} earlier disagreements not shown; ?format=json has them all)")
    for a in summary["autoscalers"]:
        lines.append(f"{a['namespace']}/{a['name']}: agreed on {a['agreed']} of {a['decisions']}")
    return "\n".join(lines) + "\n"
