"""``gavelsched replay`` (issue #20): a trace's jobs submitted to a live scheduler at their
(scaled) arrival times, watched to the end, written as the Simulation result JSON. Here a
real scheduler and an emulated worker daemon on loopback, the light ``steps`` workload, and
both trace formats; a job the scheduler refuses is reported and the others go on."""

from __future__ import annotations

import json

import pytest

from gavelsched.cli import main
from gavelsched.daemon.local import LocalCluster
from traces.formats import write_trace
from traces.types import TraceJob

JOBS = [TraceJob("ResNet-18 (batch size 16)", 1, 4000, 0.0),
        TraceJob("LM (batch size 5)", 1, 6000, 100.0),
        TraceJob("Recommendation (batch size 512)", 1, 5000, 150.0)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = LocalCluster(tmp_path_factory.mktemp("replay"), round_seconds=2.0)
    cluster.start_scheduler()
    cluster.start_worker("v100", 2, emulation_speed=1.0)
    yield cluster
    cluster.stop()


@pytest.mark.parametrize("suffix", [".jsonl", ".trace"])
def test_a_trace_replays_at_its_scaled_arrivals_and_writes_the_result(cluster, tmp_path,
                                                                      suffix, capsys):
    trace, out = tmp_path / f"t{suffix}", tmp_path / "result.json"
    write_trace(trace, JOBS)
    code = main(["replay", str(trace), "--scheduler", cluster.address, "--time-scale", "0.02",
                 "--steps-scale", "0.01", "--workload", "steps", "--json", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "completed           3/3 jobs" in printed.out
    result = json.loads(out.read_text())
    jobs = result["jobs"]
    assert [j["job_type"] for j in jobs] == [j.job_type for j in JOBS]
    arrivals = [j["arrival_s"] - jobs[0]["arrival_s"] for j in jobs]
    assert arrivals[1] >= 100.0 * 0.02 - 0.5 and arrivals[2] >= 150.0 * 0.02 - 0.5
    assert all(j["completion_s"] is not None and j["jct_s"] > 0 for j in jobs)
    status = {j.id: j for j in cluster.status().jobs}
    assert sorted(status[j["id"]].total_steps for j in jobs) == [40, 50, 60]


def test_a_refused_job_is_one_line_and_the_others_finish(cluster, tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    write_trace(trace, [JOBS[0], TraceJob("no such type", 1, 100, 1.0)])
    code = main(["replay", str(trace), "--scheduler", cluster.address, "--time-scale", "0.02",
                 "--steps-scale", "0.01", "--workload", "steps"])
    printed = capsys.readouterr()
    assert code == 1
    refused = [line for line in printed.err.splitlines() if "no such type" in line]
    assert len(refused) == 1 and "refused" in refused[0]
    assert "completed           1/1 jobs" in printed.out


def test_submissions_far_behind_the_trace_get_a_note(capsys):
    """``report`` says when the submissions fell more than ``LATE_NOTE_S`` behind the
    trace (a user's budget of calls slows them), and says nothing otherwise."""
    from dataclasses import replace

    from gavelsched.cli.drive import LATE_NOTE_S, report
    from gavelsched.client.schedule import run_schedule
    from gavelsched.rpc import pb

    class Instant:      # a scheduler stand-in whose one job ends as it is submitted
        def submit(self, request):
            return "0"

        def status(self):
            return pb.StatusResponse(policy="fifo", workers=[
                pb.WorkerStatus(id="0", type="v100", gpus=1, alive=True)], jobs=[
                pb.JobStatus(id="0", state="done", job_type="A3C", scale_factor=1,
                             arrival_s=0.0, completion_s=1.0)])

    outcome = run_schedule(Instant(), [(0.0, pb.JobRequest(job_type="A3C"))], prices={},
                           refused=lambda err: None)
    assert report(replace(outcome, late_s=0.0), None) == 0
    assert "behind" not in capsys.readouterr().err
    assert report(replace(outcome, late_s=LATE_NOTE_S + 7.25), None) == 0
    assert (f"note: submissions fell up to {LATE_NOTE_S + 7.25:.1f} s behind the trace"
            in capsys.readouterr().err)


def test_bad_scales_and_an_unreachable_scheduler_are_one_line(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    write_trace(trace, JOBS)
    assert main(["replay", str(trace), "--time-scale", "0"]) == 2
    assert main(["replay", str(trace), "--steps-scale", "nan"]) == 2
    assert main(["replay", str(trace), "--workload", "nope"]) == 2
    assert main(["replay", str(tmp_path / "missing.jsonl")]) == 2
    assert main(["replay", str(trace), "--scheduler", "127.0.0.1:1"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 5 and all(line.startswith("gavelsched") for line in err), err
    assert "cannot reach the scheduler at 127.0.0.1:1" in err[-1]
