"""The metrics the README lists and the Grafana dashboard queries are the ones the code registers."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

from bot.metrics import BotMetrics
from runner.metrics import RunnerMetrics

ROOT = Path(__file__).resolve().parents[2]


def _registered() -> dict[str, str]:
    """Every metric name (as written on the page) -> its type."""
    pool = {
        "targets": {"1": 1},
        "ready": {"1": 0},
        "warming": {"1": 1},
        "refill": {"consecutive_failures": 0},
    }
    service = SimpleNamespace(load=lambda: (0, 0), pool=SimpleNamespace(state=lambda: pool))
    names: dict[str, str] = {}
    for registry in (BotMetrics().registry, RunnerMetrics(service).registry):  # type: ignore[arg-type]
        for family in registry.collect():
            page = f"{family.name}_total" if family.type == "counter" else family.name
            names[page] = family.type
    return names


def test_the_readme_table_lists_every_metric_with_its_type() -> None:
    rows = re.findall(r"^\| `(rankzero_[a-z_]+)` \| (\w+) \|", (ROOT / "README.md").read_text(), re.M)
    assert dict(rows) == _registered()


def test_the_dashboard_queries_only_registered_metrics() -> None:
    dashboard = json.loads((ROOT / "deploy" / "grafana-dashboard.json").read_text())
    used = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"rankzero_[a-z_]+", target["expr"])
    }
    known = set()
    for name, kind in _registered().items():
        known |= {name, f"{name}_bucket", f"{name}_sum", f"{name}_count"} if kind == "histogram" else {name}
    assert used and used <= known, used - known
