"""`free_port`: a port no other process can take between the pick and the server's bind."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from kubesim.net import free_port

ROOT = Path(__file__).resolve().parents[2]
HOLD = ("import sys; from kubesim.net import free_port; "
        "print(' '.join(str(free_port()) for _ in range(1000)), flush=True); sys.stdin.read()")


def _ephemeral_range() -> tuple[int, int]:
    low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    return int(low), int(high)


def test_a_free_port_lies_outside_the_ephemeral_range_and_a_server_can_bind_it() -> None:
    port = free_port()
    low, high = _ephemeral_range()
    assert not low <= port <= high  # no outgoing connection can take it as its source port
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()


def test_processes_never_get_the_same_port() -> None:
    """Two processes holding 1,000 ports each (a tenth of the range: handed out at random without the
    cross-process claim, they would share about a hundred)."""
    holders = [subprocess.Popen([sys.executable, "-c", HOLD], cwd=ROOT, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        a, b = ({int(p) for p in h.stdout.readline().split()} for h in holders)  # type: ignore[union-attr]
        assert len(a) == len(b) == 1000  # nor twice within one process
        assert not a & b
    finally:
        for h in holders:
            h.communicate("", timeout=30)
