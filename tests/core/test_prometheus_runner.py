"""The sandbox's Prometheus runner: starting twice must not orphan a process."""

from kubesim.prometheus import PrometheusServer


def test_start_is_idempotent_and_close_stops_the_one_process():
    server = PrometheusServer()
    with server.start() as same:   # start() and then __enter__: one process, not two
        assert same is server
        first = server.proc
        assert server.start().proc is first
    assert first.poll() is not None  # stopped on exit
    assert not server.running
