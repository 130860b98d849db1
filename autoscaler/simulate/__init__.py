"""`autoscaler simulate`: the HPA decision for a scenario file, offline (see cli.py)."""

from .cli import main
from .output import check, decision_json
from .scenario import Scenario, ScenarioError, build_scenario, load_scenarios

__all__ = ["Scenario", "ScenarioError", "build_scenario", "check", "decision_json", "load_scenarios", "main"]
