"""Prometheus metrics of the runner, served at ``GET /metrics`` (runner/api.py).

One :class:`RunnerMetrics` per service, with a registry of its own (never prometheus_client's global
default), so tests and several runners in one process never mix their counts. The gauges are read from
the service when the page is scraped (jobs running and waiting, warm sandboxes ready and warming), so they
can never drift from what /v1/health reports.

Labels are bounded: ``mode`` (python, dp, ddp), ``nproc`` (1..64, the API's limit), ``status`` (the
verdict statuses) and ``capacity`` (the pool's configured sizes). Nothing a snippet prints or raises
reaches the page. runner/README.md lists the metrics and says who may read them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from runner.service import RunnerService
    from runner.verdict import Verdict

#: The Content-Type of :meth:`RunnerMetrics.render`.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: A warm single-rank job answers in a fraction of a second, a cold DDP job in seconds, a hung one at its
#: timeout (30 s by default, at most an hour).
VERDICT_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0)


class _ServiceState(Collector):
    """Gauges read from the service at each scrape."""

    def __init__(self, service: RunnerService) -> None:
        self._service = service

    def collect(self) -> Iterator[GaugeMetricFamily]:
        running, queued = self._service.load()
        yield GaugeMetricFamily(
            "rankzero_runner_jobs_running", "Jobs running in a sandbox now", value=running
        )
        yield GaugeMetricFamily(
            "rankzero_runner_jobs_queued", "Jobs admitted that wait for a slot or for GPUs", value=queued
        )
        pool = self._service.pool.state()
        ready = GaugeMetricFamily(
            "rankzero_runner_warm_sandboxes_ready",
            "Warm sandboxes ready to take a job, by capacity (the most ranks one can fork)",
            labels=["capacity"],
        )
        warming = GaugeMetricFamily(
            "rankzero_runner_warm_sandboxes_warming",
            "Sandboxes being warmed for the pool, by capacity",
            labels=["capacity"],
        )
        for capacity in pool["targets"]:
            ready.add_metric([capacity], pool["ready"].get(capacity, 0))
            warming.add_metric([capacity], pool["warming"].get(capacity, 0))
        yield ready
        yield warming
        yield GaugeMetricFamily(
            "rankzero_runner_pool_refill_failures",
            "Failures in a row of the warm pool's refill (0: it refills)",
            value=pool["refill"]["consecutive_failures"],
        )


class RunnerMetrics:
    """The runner's metrics (see the module doc), in a registry of their own."""

    def __init__(self, service: RunnerService, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.verdict_seconds = Histogram(
            "rankzero_runner_verdict_seconds",
            "Seconds from a run request to its verdict, by shape (mode, ranks) and verdict status",
            ["mode", "nproc", "status"],
            buckets=VERDICT_BUCKETS,
            registry=self.registry,
        )
        self.refused = Counter(
            "rankzero_runner_runs_refused",
            "Run requests answered 503 because no sandbox could be started (nothing ran)",
            registry=self.registry,
        )
        self.registry.register(_ServiceState(service))

    def verdict(self, verdict: Verdict, seconds: float) -> None:
        """A run answered ``verdict`` after ``seconds``."""
        self.verdict_seconds.labels(verdict.mode.value, str(verdict.nproc), verdict.status.value).observe(
            max(0.0, seconds)
        )

    def render(self) -> bytes:
        """The metrics page (Prometheus' text format, :data:`CONTENT_TYPE`)."""
        return generate_latest(self.registry)
