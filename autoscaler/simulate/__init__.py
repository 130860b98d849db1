"""`autoscaler simulate`: the HPA decision for a scenario file, offline (see cli.py)."""

from .cli import main
from .output import check, decision_json
from .scenario import Scenario, ScenarioError, build_scenario, load_scenarios

__all__ = ["main", "check", "decision_json", "Scenario", "ScenarioError", "build_scenario", "load_scenarios"]
