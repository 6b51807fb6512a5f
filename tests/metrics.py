"""Reading the operator's /metrics in tests: samples keyed by name and labels, summed by a label subset."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.operator_harness import RunningOperator


def scrape(operator: RunningOperator) -> dict[tuple[str, tuple], float]:
    return scrape_url(f"{operator.metrics_url}/metrics")


def scrape_url(url: str) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float:
    """Sum of the samples of `name` whose labels include `labels`."""
    return sum(
        v for (n, sample_labels), v in samples.items() if n == name and set(labels.items()) <= set(sample_labels)
    )
