"""Loopback helpers."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import httpx


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
