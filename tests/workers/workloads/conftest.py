"""Fixtures the workload tests share."""

from __future__ import annotations

import pytest

from tests.workers.fake_scheduler import FakeScheduler


@pytest.fixture
def sched():
    """A fake scheduler serving real gRPC on loopback, for jobs to run against."""
    fake = FakeScheduler()
    fake.start()
    yield fake
    fake.stop()
