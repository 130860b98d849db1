"""`explain` errors that the sandbox does not produce: RBAC denial (a stub API server answering
403 Status objects over real HTTP) and an API server that is not there. One line each, naming
the object and the API; exit status 1."""

from __future__ import annotations

import io
from pathlib import Path
from urllib.parse import ParseResult

from autoscaler.explain import cli
from kubesim.kubeconfig import write_kubeconfig
from kubesim.net import free_port

from ..adapter.conftest import StubAPI, serving


class Forbidden(StubAPI):
    def reply(self, url: ParseResult) -> tuple[int, dict]:
        resource = url.path.rstrip("/").split("/")[-2]
        return 403, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
                     "message": f'{resource} "web" is forbidden: User "viewer" cannot get resource "{resource}"'}


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return cli.main(argv, out, err), out.getvalue(), err.getvalue()


def test_rbac_denied_names_the_object_and_the_api(tmp_path: Path):
    with serving(Forbidden) as server:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{server.server_port}", "token")
        for kind, name, api in (("horizontalautoscaler", "HorizontalAutoscaler", "promscaler.io/v1alpha1"),
                                ("hpa", "HorizontalPodAutoscaler", "autoscaling/v2")):
            code, out, err = _run(["web", "-n", "demo", "--kind", kind, "--kubeconfig", str(kubeconfig)])
            assert code == 1 and out == ""
            assert err.count("\n") == 1, err
            assert f"{name} demo/web: {api}: forbidden (RBAC)" in err and 'User "viewer"' in err


def test_unreachable_api_server_is_one_line(tmp_path: Path):
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{free_port()}", "token")
    code, out, err = _run(["web", "-n", "demo", "--kubeconfig", str(kubeconfig), "-o", "json"])
    assert code == 1 and out == ""
    assert err.count("\n") == 1, err
    assert "HorizontalAutoscaler demo/web: the API server at http://127.0.0.1:" in err


def test_usage_errors_exit_2():
    code, _, err = _run(["web", "--kind", "deployment"])
    assert code == 2 and "--kind" in err and err.count("\n") == 1
