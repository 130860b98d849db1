"""Loopback helpers."""

from __future__ import annotations

import fcntl
import functools
import itertools
import os
import random
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

# Ports handed out by `free_port`, claimed across processes by a one-byte lock each (offset = port)
# in this file; the kernel drops a process's locks when it exits, however it exits.
PORT_LOCKS = Path(tempfile.gettempdir()) / "promscaler-ports.lock"
_claim_lock = threading.Lock()
_claimed: set[int] = set()
_locks_fd: int | None = None


def free_port() -> int:
    """A free TCP port on 127.0.0.1 for a server this process is about to start (or for nothing to
    listen on), kept from everyone else between the pick and the server's bind.

    A port the kernel picks (bind to 0) comes from the ephemeral range, where any outgoing connection
    on the machine may take it as its source port before the server binds. This one lies outside that
    range (below it, else above it), and a lock only this process holds keeps it from other callers
    of `free_port` (parallel test workers, other runs) and this process from handing it out twice."""
    candidates = _unused_range()
    tries = (random.choice(candidates) for _ in range(100)) if candidates else ()
    with _claim_lock:
        for port in itertools.chain(tries, candidates):  # at random, then every one in turn
            if port not in _claimed and _claim(port):
                _claimed.add(port)
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # no range outside the ephemeral one
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@functools.cache
def _unused_range() -> list[int]:
    """Ports outside the kernel's ephemeral range (net.ipv4.ip_local_port_range), at most 10,000."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999  # Linux's default
    below = range(max(1024, low - 10_000), low)
    return list(below) if len(below) >= 1000 else list(below) + list(range(high + 1, 65536))


def _claim(port: int) -> bool:
    """Lock `port`'s byte (no other process holds it) and check nothing listens on it."""
    global _locks_fd
    if _locks_fd is None:
        try:
            _locks_fd = os.open(PORT_LOCKS, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError:  # another user's file: ports outside the ephemeral range, unclaimed
            _locks_fd = -1
    try:
        if _locks_fd >= 0:
            fcntl.lockf(_locks_fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, port)
    except OSError:  # another process holds it
        return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:  # something outside this scheme listens on it (or it is still in TIME_WAIT)
            if _locks_fd >= 0:
                fcntl.lockf(_locks_fd, fcntl.LOCK_UN, 1, port)
            return False


def wait_http(url: str, timeout: float = 30.0, ok=lambda r: r.status_code < 500,
              gone: Callable[[], str | None] | None = None, **kwargs) -> None:
    """Poll `url` until it answers (per `ok`) or `timeout` seconds pass. `gone`: why waiting is
    pointless (the server's process exited), checked before each try; RuntimeError with it."""
    deadline = time.monotonic() + timeout
    last: Exception | str = "no answer"
    while time.monotonic() < deadline:
        if gone is not None and (reason := gone()) is not None:
            raise RuntimeError(reason)
        try:
            r = httpx.get(url, timeout=2.0, **kwargs)
            if ok(r):
                return
            last = f"HTTP {r.status_code}"
        except httpx.HTTPError as exc:
            last = exc
        time.sleep(0.1)
    raise TimeoutError(f"{url} not ready after {timeout}s: {last}")
