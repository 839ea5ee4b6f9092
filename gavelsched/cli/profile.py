"""``gavelsched profile``: measure this machine's throughput row for one worker type, steps/s
of every catalog job type at scale factor 1 (thesis §5.7.1, Table 5.2), with each family's
real architecture and batch size on synthetic data (``workers/profiling/``)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from . import InputError
from .args import needs_torch

log = logging.getLogger(__name__)

SECONDS_FULL, SECONDS_REDUCED = 1.0, 0.05


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "profile", formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        help="measure this machine's steps/s for the catalog's job types",
        description="Time training steps of every job type of the catalog (thesis Table "
                    "5.2) on this machine's GPU, or its CPU, at scale factor 1: each family's "
                    "real network (ResNet-50, CIFAR ResNet-18, A3C, the Zaremba LSTM LM, "
                    "Transformer base, CycleGAN, Recoder) at the job type's batch size, on "
                    "synthetic data with no data loading. Each job type takes 2 warm-up "
                    "steps, then timed steps for --seconds-per-type (at least 3). A job type "
                    "that fails (e.g. out of memory) is listed as skipped. Writes the "
                    "gavelsched-profile/1 JSON (steps_per_s by job type, the device, the "
                    "precision, what was built) and prints a table. --reduced shrinks "
                    "widths, images, vocabularies and batches (/16) to test the tool on a "
                    "CPU: its rates are not the worker type's.")
    p.add_argument("--type", required=True, dest="worker_type", metavar="TYPE",
                   help="the worker type this row is for, e.g. v100, h100")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="FILE",
                   help="profile JSON to write (atomically)")
    p.add_argument("--reduced", action="store_true",
                   help="small models and batches: the whole row in seconds on a CPU")
    p.add_argument("--amp", choices=("fp32", "bf16"), default="fp32",
                   help="precision: bf16 autocasts forward and loss (parameters stay fp32)")
    p.add_argument("--job-types", metavar="A,B", default=None,
                   help="comma-separated job types to measure; None: every job type of the "
                        "catalog")
    p.add_argument("--seconds-per-type", type=float, default=None, metavar="S",
                   help=f"timed seconds per job type; None: {SECONDS_FULL:g}, or "
                        f"{SECONDS_REDUCED:g} with --reduced")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                   help="auto: the GPU if CUDA is available, else the CPU")
    p.set_defaults(func=run, log_level=logging.INFO)   # progress lines, like the daemons
    p.error = lambda message: p.exit(2, f"gavelsched profile: error: {message}\n")


def _job_types(text: str | None) -> list[str]:
    """The job types of ``--job-types``, in its order (without it: the catalog's)."""
    from traces.catalog import default_catalog

    known = default_catalog().job_types
    if text is None:
        return list(known)
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise InputError(f"--job-types {text!r}: no job type given")
    for name in names:
        if name not in known:
            raise InputError(f"--job-types: unknown job type {name!r}; known: "
                             f"{', '.join(known)}")
    return list(dict.fromkeys(names))


def _device(choice: str, amp: str):
    import torch

    from workers.profiling.measure import bf16_supported

    cuda = torch.cuda.is_available()
    if choice == "cuda" and not cuda:
        raise InputError("--device cuda: CUDA is not available on this machine")
    device = torch.device("cuda" if choice == "cuda" or (choice == "auto" and cuda) else "cpu")
    if amp == "bf16" and not bf16_supported(device):
        raise InputError(f"--amp bf16: not supported on {device} of this machine")
    return device


def run(args: argparse.Namespace) -> int:
    needs_torch("profile")
    from tqdm import tqdm
    from tqdm.contrib.logging import logging_redirect_tqdm

    from workers.profiling.measure import measure_row

    worker_type = args.worker_type.strip()
    if not worker_type:
        raise InputError("--type: empty worker type")
    seconds = args.seconds_per_type
    if seconds is None:
        seconds = SECONDS_REDUCED if args.reduced else SECONDS_FULL
    if not 0 < seconds < float("inf"):
        raise InputError(f"--seconds-per-type {seconds:g}: must be a positive number")
    names = _job_types(args.job_types)
    output = _output(args.output)
    device = _device(args.device, args.amp)
    if device.type == "cpu" and not args.reduced:
        log.warning("full-size models on a CPU: this will be slow (minutes per job type); "
                    "--reduced tests the tool in seconds")
    with logging_redirect_tqdm(), tqdm(total=len(names), unit="type", file=sys.stderr,
                                       desc=f"profiling {worker_type}") as bar:
        row = measure_row(worker_type, device=device, precision=args.amp,
                          reduced=args.reduced, job_types=names, seconds_per_type=seconds,
                          progress=lambda name: bar.update())
    from traces.errors import TraceError
    from traces.profiles import profile_from_dict

    try:   # what is written is what the scheduler's door reads (one format, one reader)
        profile_from_dict(row, str(output))
    except TraceError as err:
        raise InputError(f"no usable row measured ({len(row['skipped'])} job types "
                         f"skipped): {str(err).splitlines()[0]}") from None
    _write_atomically(output, row)
    _print_table(row)
    log.info("wrote %s: %d job types measured, %d skipped, in %.1f s", output,
             len(row["steps_per_s"]), len(row["skipped"]), row["seconds"])
    return 0


def _output(path: Path) -> Path:
    """``-o`` made absolute once, and checked before any measuring."""
    path = path.absolute()
    if path.is_dir():
        raise InputError(f"-o {path}: is a folder")
    if not path.parent.is_dir():
        raise InputError(f"-o {path}: folder {path.parent} does not exist")
    return path


def _write_atomically(path: Path, row: dict[str, Any]) -> None:
    """Temp file in the target's folder, then ``os.replace``: a reader never sees half."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(row, out, indent=1)
            out.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _print_table(row: dict[str, Any]) -> None:
    from traces.catalog import default_catalog
    from workers.profiling.architectures import batch_size

    infos = default_catalog().job_types
    print(f"{row['worker_type']} on {row['device']}, {row['precision']}"
          f"{', reduced sizes' if row['reduced'] else ''}, {row['seconds']:.1f} s")
    width = max([len(name) for name in row["steps_per_s"]] + [len("job type")])
    print(f"{'job type':<{width}} {'batch':>5} {'steps/s':>10} {'samples/s':>10}")
    for name, rate in row["steps_per_s"].items():
        batch = batch_size(infos[name].batch_size, row["reduced"])
        print(f"{name:<{width}} {batch:>5} {rate:>10.4g} {rate * batch:>10.4g}")
    for name, reason in row["skipped"].items():
        print(f"skipped {name}: {reason}")
