"""Summaries of repeated measurements: medians and spread, never a lone mean."""

from __future__ import annotations

import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Summary:
    median: float
    q1: float
    q3: float
    min: float
    max: float
    n: int

    @classmethod
    def of(cls, samples: list[float]) -> Summary:
        if not samples:
            raise ValueError("no samples to summarize")
        ordered = sorted(samples)
        if len(ordered) >= 2:
            q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
        else:
            q1 = q3 = ordered[0]
        return cls(statistics.median(ordered), q1, q3, ordered[0], ordered[-1], len(ordered))

    @property
    def spread(self) -> float:
        """Interquartile range relative to the median (0.05 = 5 %)."""
        return (self.q3 - self.q1) / self.median if self.median else 0.0
