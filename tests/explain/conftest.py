"""The controller tests' sandbox (KubeSim with the CRD, a fake metrics upstream behind its
aggregation) for explaining autoscalers a live controller has written a status for."""

from ..controller.conftest import fake, sim  # noqa: F401  (fixtures, used by name)
