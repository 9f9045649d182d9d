"""The runner's /metrics, scraped over real HTTP from a real ``rankzero-runner serve`` after real jobs."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.runner_server import runner_server

pytestmark = pytest.mark.slow

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str) -> Samples:
    """GET /metrics without a token (it is open, like the probes) and parse every sample."""
    response = httpx.get(f"{url}/metrics", timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_verdicts_jobs_and_the_warm_pool_show_on_the_metrics_page() -> None:
    with runner_server(pool="1:1") as server:
        auth = {"Authorization": f"Bearer {server.token}"}
        before = scrape(server.url)
        assert (
            value(before, "rankzero_runner_verdict_seconds_count", mode="python", nproc="1", status="ok") == 0
        )

        with httpx.Client(base_url=server.url, headers=auth, timeout=120) as http:
            ok = http.post("/v1/runs", json={"code": "print(6 * 7)"})
            assert ok.status_code == 200 and ok.json()["status"] == "ok", ok.text
            failed = http.post("/v1/runs", json={"code": "raise ValueError('no')\n"})
            assert failed.json()["status"] == "error"

            # A job in flight: the running gauge shows it while it sleeps.
            slow: dict[str, httpx.Response] = {}
            job = threading.Thread(
                target=lambda: slow.setdefault(
                    "r", http.post("/v1/runs", json={"code": "import time; time.sleep(4)"})
                )
            )
            job.start()
            running = 0.0
            for _ in range(200):  # polls, not a clock: the job is seen running or the test fails
                running = value(scrape(server.url), "rankzero_runner_jobs_running")
                if running == 1 or "r" in slow:
                    break
                time.sleep(0.05)
            job.join()
            assert running == 1, "the job never showed as running"
            assert slow["r"].json()["status"] == "ok"

        after = scrape(server.url)
        assert (
            value(after, "rankzero_runner_verdict_seconds_count", mode="python", nproc="1", status="ok") == 2
        )
        assert (
            value(after, "rankzero_runner_verdict_seconds_count", mode="python", nproc="1", status="error")
            == 1
        )
        assert value(after, "rankzero_runner_verdict_seconds_sum", mode="python", nproc="1", status="ok") > 0
        assert value(after, "rankzero_runner_jobs_running") == 0
        assert value(after, "rankzero_runner_jobs_queued") == 0
        assert ("rankzero_runner_warm_sandboxes_ready", frozenset({("capacity", "1")})) in after
        assert value(after, "rankzero_runner_pool_refill_failures") == 0
        # Open without a token, yet nothing else is: the page is the only addition to the probes.
        assert httpx.get(f"{server.url}/v1/health").status_code == 401
        assert httpx.post(f"{server.url}/metrics").status_code in (401, 405)
