"""``gavelsched local-cluster``: a scheduler and emulated workers on loopback run a job mix
to the end and write the Simulation result JSON with every job's completion time (here
with the light ``steps`` workload and short rounds; the README's demo runs torch jobs)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gavelsched.cli import main
from gavelsched.daemon.local import LocalCluster, subprocess_env, wait_until


def test_local_cluster_runs_a_mix_and_writes_the_result_json(tmp_path, capsys):
    out = tmp_path / "result.json"
    code = main(["local-cluster", "--workers", "k80=1,v100=1", "--jobs", "2",
                 "--round-seconds", "1.5", "--emulation-speed", "1", "--workload", "steps",
                 "--json", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err
    assert "average JCT" in printed.out and "completed           2/2 jobs" in printed.out
    # how to reach it from another shell while it runs (issue #29): its address and token
    (line,) = [x for x in printed.err.splitlines() if x.startswith("scheduler: 127.0.0.1:")]
    assert "gavelsched status --scheduler 127.0.0.1:" in line and "--token-file " in line
    result = json.loads(out.read_text())
    assert result["policy"] == "max_min_fairness_perf"
    assert len(result["jobs"]) == 2
    for job in result["jobs"]:
        assert job["completion_s"] is not None and job["completion_s"] > job["arrival_s"]
        assert job["jct_s"] == job["completion_s"] - job["arrival_s"]
    assert result["makespan_s"] >= max(j["jct_s"] for j in result["jobs"])
    assert result["resolves"] >= 1


def test_verbose_local_cluster_passes_its_level_to_the_scheduler(tmp_path):
    """``gavelsched -v local-cluster``: its scheduler logs DEBUG too (each re-solve's
    allocation, what a replay's differences are traced to)."""
    kept = tmp_path / "run"
    assert main(["-v", "local-cluster", "--workers", "v100=1", "--jobs", "1",
                 "--round-seconds", "1.5", "--emulation-speed", "1", "--workload", "steps",
                 "--keep", str(kept)]) == 0
    log = (kept / "scheduler.log").read_text()
    assert " DEBUG " in log and "; allocation {" in log


@pytest.mark.parametrize("flags, words", [
    (["--workers", "h100=1"], "h100"),
    # (each below started the daemons first: a traceback once the scheduler exited, or a
    # wait of two minutes for a worker the scheduler refused)
    (["--round-seconds", "inf"], "--round-seconds must be in [0.1, 1e+07], got inf"),
    (["--round-seconds", "1e9"], "--round-seconds must be in [0.1, 1e+07]"),
    (["--emulation-speed", "inf"], "--emulation-speed must be a finite number > 0"),
    (["--workers", "v100=5000"], "--workers: v100=5000: a worker has at most 4096 GPUs"),
    (["--policy", "nope"], "unknown policy 'nope'"),
    (["--keep", "/dev/null"], "--keep /dev/null: cannot be the cluster's folder"),
    # (these two did nothing without a trace, and a bad value passed unchecked)
    (["--time-scale", "0.5"], "--time-scale and --steps-scale scale a --trace"),
    (["--steps-scale", "nan"], "--steps-scale must be a positive number, got nan"),
])
def test_local_cluster_bad_flags_are_one_line_before_any_daemon(capsys, monkeypatch, flags,
                                                              words):
    monkeypatch.setattr(LocalCluster, "start_scheduler",
                        lambda *a, **k: pytest.fail("the daemons were started"))
    assert main(["local-cluster", *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0], err


def _start(tmp_path, *flags):
    """``gavelsched local-cluster`` as a user runs it, with its temp dir under ``tmp_path``;
    returns the process and the scheduler's address and token file it printed."""
    env = {**subprocess_env(), "TMPDIR": str(tmp_path)}
    err = open(tmp_path / "stderr.txt", "w")
    proc = subprocess.Popen([sys.executable, "-m", "gavelsched", "local-cluster",
                             "--workers", "v100=1", "--workload", "steps",
                             "--emulation-speed", "1", *flags], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=err, text=True)
    line = wait_until(lambda: next((x for x in (tmp_path / "stderr.txt").read_text()
                                    .splitlines() if x.startswith("scheduler: ")), None),
                      120, "local-cluster to print its scheduler")
    address = line.split()[1]
    token = line.split("(token file: ")[1].split(")")[0]
    return proc, address, token


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "gavelsched", *args], env=subprocess_env(),
                          capture_output=True, text=True, timeout=60)


def test_it_waits_for_a_job_submitted_from_elsewhere_and_a_cancel_is_no_failure(tmp_path):
    # issue #29: it stopped its cluster while a job submitted from another shell ran
    # (32%), exited 1 because a job was cancelled on purpose, and counted 10/10 of 11
    proc, address, token = _start(tmp_path, "--jobs", "2", "--round-seconds", "2")
    try:
        spec = tmp_path / "job.yaml"
        spec.write_text("job_type: ResNet-18 (batch size 16)\ntotal_steps: 100000000\n"
                        "workload: steps\n")
        flags = ("--scheduler", address, "--token-file", token)
        mine = _cli("submit", str(spec), *flags)
        assert mine.returncode == 0, mine.stderr
        assert _cli("cancel", "0", *flags).returncode == 0        # one of its own
        wait_until(lambda: '"state": "done"' in _cli("status", "--all", "--json",
                                                     *flags).stdout, 120,
                   "its other job to finish")
        time.sleep(3.0)
        assert proc.poll() is None          # still running: the job from elsewhere runs
        other = mine.stdout.split()[-1] if mine.stdout.split() else "2"
        assert _cli("cancel", other, *flags).returncode == 0
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = (tmp_path / "stderr.txt").read_text()
    assert proc.returncode == 0, out + err
    assert "(+1 from elsewhere)" in err
    assert "job 0 (" in out and "cancelled" in out


def test_sigterm_stops_the_daemons_and_removes_the_temp_dir_at_once(tmp_path):
    proc, address, token = _start(tmp_path, "--jobs", "4", "--round-seconds", "5")
    temp = [p for p in tmp_path.iterdir() if p.name.startswith("gavel-local-")]
    assert len(temp) == 1
    children = _processes_under(temp[0])
    assert children                          # its scheduler and worker run from there
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    assert not temp[0].exists()
    wait_until(lambda: not _processes_under(temp[0]), 30, "its daemons to exit")
    assert "Traceback" not in (tmp_path / "stderr.txt").read_text()


def _processes_under(folder) -> list[int]:
    """Processes whose command line names ``folder`` (the daemons local-cluster started)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if str(folder) in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    out.append(int(entry.name))
            except OSError:
                continue
    return out
