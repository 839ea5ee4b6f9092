"""``status``, ``history`` and ``logs`` at 10,000 queued jobs (issue #18): each must answer
in under 1 s as a user runs it, a fresh ``gavelsched`` process talking gRPC to the
scheduler with the cluster's token.

A real scheduler (``LocalCluster``: ``max_min_fairness_perf``, ``--round-seconds`` rounds)
and ``--workers`` real worker daemons of one emulated GPU each, on loopback. A first job
prints ``--log-mib`` MiB to stdout and then steps GavelIterator (its ``logs``); then
``--jobs`` jobs of the light ``steps`` workload (five job types, three entities in turn),
far more work than the GPUs hold, so nearly all of them wait ``queued``. Once a round has
planned them all, each command runs ``--repeat`` times, each in a fresh process: its wall
time (median, worst; imports included), its CPU time (user + system: what the machine's
load does not stretch), what it printed, and the peak RSS of its process (``ru_maxrss`` of
``wait4``). Then the dashboard (``dashboard_listen``): its ``/api/status`` over HTTP with
the token, and the page as a person gets it: a headless Chromium (Debian's, through
selenium; skipped without them) navigating to the page until it has drawn the status
(``document.body.dataset.loaded``), each ``--repeat`` times (the browser's own start is
one-time and left out). Then the scheduler's RSS (now and peak).

    python benchmarks/status_scale.py                       # 10,000 jobs (~2 min)
    python benchmarks/status_scale.py --jobs 500 --repeat 2  # smoke
"""

from __future__ import annotations

import argparse
import statistics
import sys
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]       # its neighbours; the project

from daemon_load import JOB_TYPES, rss_mib  # noqa: E402  (the job mix, /proc RSS)
from policy_solve import header  # noqa: E402  (the machine line)

from gavelsched.daemon.local import LocalCluster, free_port, subprocess_env, wait_until  # noqa: E402
from gavelsched.rpc import pb  # noqa: E402
from gavelsched.rpc.security import new_token  # noqa: E402
from tests import browser  # noqa: E402  (the headless Chromium the dashboard test uses)

ENTITIES = ("teamA", "teamB", "teamC")
TIME = shutil.which("time") or "/usr/bin/time"     # GNU time: the command's own peak RSS
TARGET_S = 1.0


def commands(chatty: str) -> list[tuple[str, list[str]]]:
    """(what it is, the arguments of ``gavelsched``)."""
    return [
        ("`status` (the jobs not finished: a table)", ["status"]),
        ("`status --json`", ["status", "--json"]),
        ("`status --state running`", ["status", "--state", "running"]),
        ("`history` (every job, with its times)", ["history"]),
        ("`history --json`", ["history", "--json"]),
        ("`history --state queued --type A3C --entity teamA`",
         ["history", "--state", "queued", "--type", "A3C", "--entity", "teamA"]),
        (f"`logs {chatty}`", ["logs", chatty]),
    ]


def run(cluster: LocalCluster, args: list[str]) -> tuple[float, float, int, float]:
    """One fresh ``gavelsched ARGS``: (wall s, CPU s, bytes printed, peak RSS MiB), under
    GNU ``time`` (``ru_maxrss`` of a process this one forks or spawns would count this
    process's pages, which Linux keeps across ``exec``)."""
    with tempfile.TemporaryDirectory() as tmp, open(Path(tmp) / "out", "wb") as out:
        usage = Path(tmp) / "usage"
        argv = [TIME, "-f", "%M %U %S", "-o", str(usage), sys.executable, "-m", "gavelsched",
                *args, "--scheduler", cluster.address, "--token-file", str(cluster.token_file)]
        t0 = time.perf_counter()
        proc = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, env=subprocess_env())
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"gavelsched {' '.join(args)} failed: {proc.stderr[-500:]!r}")
        kib, user, system = usage.read_text().split()[-3:]
        return wall, float(user) + float(system), out.tell(), int(kib) / 1024


def dashboard_rows(cluster: LocalCluster, repeat: int) -> list[tuple[str, int, list[float]]]:
    """(what, bytes, wall times) of ``/api/status`` and of the page in a browser."""
    import urllib.request

    base = f"http://{cluster.dashboard_address}"
    request = urllib.request.Request(base + "/api/status",
                                     headers={"Authorization": f"Bearer {cluster.token}"})
    walls, size = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        with urllib.request.urlopen(request, timeout=60) as reply:
            size = len(reply.read())
        walls.append(time.perf_counter() - t0)
    rows = [("dashboard `/api/status` (HTTP, with the token)", size, walls)]
    browser = _browser()
    if browser is None:
        return rows
    try:
        browser.get(cluster.dashboard_url)               # sets the cookie
        walls = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            browser.get(base + "/")
            wait_until(lambda: browser.execute_script("return document.body.dataset.loaded"),
                       120, "the page to draw the status")
            walls.append(time.perf_counter() - t0)
        rows.append(("dashboard page in headless Chromium, until drawn", 0, walls))
    finally:
        browser.quit()
    return rows


def _browser():
    """A headless Debian Chromium (``tests/browser.py``), or None (said on stderr)."""
    why = browser.missing()
    if why:
        print(f"{why}: the page load is not measured", file=sys.stderr)
        return None
    return browser.chromium(Path(tempfile.mkdtemp(prefix="gavel-chromium-")))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--round-seconds", type=float, default=20.0)
    parser.add_argument("--log-mib", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    machine = header()

    with tempfile.TemporaryDirectory(prefix="gavel-status-") as tmp:
        cluster = LocalCluster(Path(tmp), round_seconds=args.round_seconds,
                               heartbeat_seconds=2.0, token=new_token(),
                               config={"expected_workers": args.workers,
                                       "min_resolve_interval_s": args.round_seconds,
                                       "dashboard_listen": f"127.0.0.1:{free_port()}"})
        try:
            cluster.start_scheduler()
            for i in range(args.workers):
                cluster.start_worker(("v100", "k80")[i % 2], 1, emulation_speed=0.05,
                                     grace_s=args.round_seconds)
            wait_until(lambda: cluster.alive_workers() == args.workers, 120, "the workers")
            lines = int(args.log_mib * 2**20 / 100)
            chatty = cluster.submit(pb.JobRequest(
                job_type="A3C", total_steps=10**7, command=(
                    f"{sys.executable} -c \"print(*('line %07d ' % i + 'x' * 86 for i in "
                    f"range({lines})), sep=chr(10))\"; exec {sys.executable} -m "
                    "workers.workloads.steps")))
            size = lines * 100

            def written():
                return sum(p.stat().st_size for p in
                           Path(tmp).glob(f"worker*/logs/{chatty}/*.out")) >= size

            wait_until(written, 120, f"job {chatty} to print {size} bytes")
            start = time.perf_counter()
            for i in range(args.jobs):
                cluster.submit(pb.JobRequest(job_type=JOB_TYPES[i % len(JOB_TYPES)],
                                             total_steps=10**7, workload="steps",
                                             entity=ENTITIES[i % len(ENTITIES)]))
            submit_s = time.perf_counter() - start
            planned = cluster.status().round
            wait_until(lambda: cluster.status().round > planned, 3 * args.round_seconds,
                       "a round to plan the queue")
            states = [j.state for j in cluster.status().jobs]
            rows = []
            for what, argv in commands(chatty):
                runs = [run(cluster, argv) for _ in range(args.repeat)]
                walls = [r[0] for r in runs]
                rows.append((what, runs[-1][2], statistics.median(walls), max(walls),
                             statistics.median(r[1] for r in runs), max(r[3] for r in runs)))
            pages = dashboard_rows(cluster, args.repeat)
            rss, hwm = rss_mib(cluster.scheduler.pid)
        finally:
            cluster.stop()

    print(f"{machine}; {args.jobs} jobs submitted in {submit_s:.1f} s "
          f"({states.count('queued')} queued, {states.count('running')} running, "
          f"{states.count('preempted')} preempted), {args.workers} workers, "
          f"{args.round_seconds:g} s rounds, {args.repeat} fresh processes per command")
    print("| command | printed | wall s, median | wall s, worst | CPU s, median | "
          f"peak RSS of the command | worst under {TARGET_S:g} s |")
    print("|---|---|---|---|---|---|---|")
    for what, printed, median, worst, cpu, peak in rows:
        shown = f"{printed:,} B" if printed < 10240 else f"{printed / 1024:,.0f} KiB"
        print(f"| {what} | {shown} | {median:.2f} | {worst:.2f} | {cpu:.2f} | "
              f"{peak:.0f} MiB | {'yes' if worst < TARGET_S else 'no'} |")
    for what, size, walls in pages:
        shown = f"{size / 1024:,.0f} KiB" if size else "the page"
        print(f"| {what} | {shown} | {statistics.median(walls):.2f} | {max(walls):.2f} | | | "
              f"{'yes' if max(walls) < TARGET_S else 'no'} |")
    print(f"| scheduler RSS, now / peak | {rss:.0f} / {hwm:.0f} MiB | | | | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
