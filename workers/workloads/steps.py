"""The light workload: no model and no torch, it only steps GavelIterator (at the pace of
its emulated worker type). For load tests and for jobs that need no training.
Run: ``python -m workers.workloads.steps [--steps N]``.

Without torch there is no process group, so the ranks of a multi-GPU ``steps`` job do not
agree on a stop step: each follows the same lease on its own, and only rank 0 saves and
reports (thesis §5.6's agreement needs the reference torch workloads)."""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import sys
from collections.abc import Sequence

from gavelsched.iterator import GavelIterator
from gavelsched.jobenv import SCHEDULER_VAR

log = logging.getLogger(__name__)

EPOCH = 1000


def run(steps: int | None = None) -> int:
    """Step the iterator until its lease ends (or ``steps`` steps alone); the final step."""
    iterator = GavelIterator(range(EPOCH), None, lambda d: None, lambda d: None)
    if not os.environ.get(SCHEDULER_VAR):
        count = 0
        for _ in itertools.islice(itertools.cycle(iterator), steps or EPOCH):
            count += 1
        return count
    while not iterator.done:
        for _ in iterator:
            pass
    iterator.close()
    return iterator.steps


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.workloads.steps",
                                     description="Step GavelIterator; no model, no torch.")
    parser.add_argument("--steps", type=int, default=None,
                        help="steps without a scheduler (default 1000)")
    args = parser.parse_args(argv)
    if args.steps is not None and args.steps <= 0:
        parser.error(f"--steps must be positive, got {args.steps}")
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log.info("steps: at step %d", run(args.steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
