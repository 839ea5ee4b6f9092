"""How ``status`` and ``history`` show jobs (``gavelsched/cli/jobviews.py``; issue #18):
times (elapsed from the first start to the end or now, JCT of done jobs, dates), a job type
never cut, allocation against received share in ``--json``."""

from __future__ import annotations

import datetime
import json

import pytest

from gavelsched.cli import jobs as jobs_cli
from gavelsched.cli import main
from gavelsched.cli.jobviews import clock, date, eta_lines, history_table, status_dict, status_table
from gavelsched.client.status import ClusterStatus
from gavelsched.rpc import pb

LONG = "Recommendation (batch size 8192)"          # 32 characters
EPOCH = 1_800_000_000.0


def reply() -> pb.StatusResponse:
    return pb.StatusResponse(
        round=7, policy="max_min_fairness_perf", round_seconds=60, now_s=5000.0,
        epoch_unix=EPOCH, workers=[pb.WorkerStatus(id="0", type="v100", gpus=1, alive=True)],
        jobs=[pb.JobStatus(id="1", state="running", steps_done=10, total_steps=100,
                           job_type=LONG, scale_factor=1, worker_type="v100", gpus=1,
                           allocation={"v100": 0.5, "k80": 0.0}, received={"v100": 0.25},
                           arrival_s=100.0, started_s=1400.0, ended_s=-1, completion_s=-1,
                           entity="teamA"),
              pb.JobStatus(id="2", state="done", steps_done=100, total_steps=100,
                           job_type="A3C", scale_factor=1, arrival_s=200.0, started_s=300.0,
                           ended_s=90_300.0, completion_s=90_300.0),
              pb.JobStatus(id="3", state="queued", total_steps=100, job_type="A3C",
                           scale_factor=2, arrival_s=400.0, started_s=-1, ended_s=-1,
                           completion_s=-1, reason="pending: waiting its turn")])


@pytest.mark.parametrize("seconds, text", [(None, "-"), (0, "00:00:00"), (59.9, "00:00:59"),
                                           (3661, "01:01:01"), (90061, "1-01:01:01")])
def test_durations_read_as_slurm_writes_them(seconds, text):
    assert clock(seconds) == text


def test_json_has_times_entity_and_shares():
    jobs = {j["id"]: j for j in status_dict(reply())["jobs"]}
    running, done, queued = jobs["1"], jobs["2"], jobs["3"]
    assert running["job_type"] == LONG and running["entity"] == "teamA"
    assert running["allocation"] == {"v100": 0.5, "k80": 0.0}
    assert running["received"] == {"v100": 0.25}
    assert (running["elapsed_s"], running["jct_s"], running["ended_s"]) == (3600.0, None, None)
    assert running["submitted_at"] == datetime.datetime.fromtimestamp(
        EPOCH + 100, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert (done["elapsed_s"], done["jct_s"]) == (90_000.0, 90_100.0)
    assert done["entity"] is None and done["ended_at"].endswith("Z")
    assert (queued["started_s"], queued["elapsed_s"], queued["started_at"]) == (None,) * 3


def test_the_status_table_keeps_whole_job_types_and_shows_elapsed():
    lines = status_table(reply())
    header, rows = lines[1], lines[2:5]
    assert header.split()[:9] == ["id", "type", "user", "state", "progress", "gpus", "on",
                                  "elapsed", "allocation/received"]
    assert rows[0].split(f" {LONG} ")[1].split()[:2] == ["-", "running"]
    assert rows[0].split()[-2:] == ["v100", "0.50/0.25"] and " 01:00:00 " in rows[0]
    assert rows[1].split()[1:4] == ["A3C", "-", "done"] and " 1-01:00:00" in rows[1]
    assert rows[2].endswith("(pending: waiting its turn)")
    # columns line up whatever the type's length
    assert {row.index(" running ") if "running" in row else row.index(" done ")
            if " done " in row else row.index(" queued ") for row in rows} == \
        {header.index(" state")}


def test_the_two_jobs_of_a_pair_say_whom_they_share_their_gpu_with():
    pair = [pb.JobStatus(id=i, state="running", steps_done=1, total_steps=10, job_type="A3C",
                         scale_factor=1, worker_type="v100", gpus=1, shared_with=o,
                         allocation={"v100": 1.0}, started_s=0.0, ended_s=-1, completion_s=-1)
            for i, o in (("4", "5"), ("5", "4"))]
    rows = status_table(pb.StatusResponse(round=1, jobs=pair))[2:4]
    assert rows[0].endswith("(shares its GPU with job 5)") and " 1/1 " in rows[0]
    assert rows[1].endswith("(shares its GPU with job 4)") and " 1/1 " in rows[1]
    assert [j["shared_with"] for j in status_dict(pb.StatusResponse(jobs=pair))["jobs"]] == \
        ["5", "4"]
    assert status_dict(reply())["jobs"][0]["shared_with"] is None


def test_the_history_table_has_dates_elapsed_and_jct():
    lines = history_table(reply())
    assert lines[0].split() == ["id", "type", "user", "entity", "state", "submitted",
                                "started", "ended", "elapsed", "jct", "steps"]
    running, done, queued = (line.split() for line in lines[1:])
    start = datetime.datetime.fromtimestamp(EPOCH + 1400).strftime("%Y-%m-%dT%H:%M:%S")
    assert running[:2] == ["1", "Recommendation"] and start in running
    assert running[-4:] == ["-", "01:00:00", "-", "10/100"]
    assert done[-3:] == ["1-01:00:00", "1-01:01:40", "100/100"] and done[2:4] == ["-", "-"]
    assert queued[-5:] == ["-", "-", "-", "-", "0/100"]


def test_the_status_header_says_what_the_solves_take_and_a_re_solve_running():
    """``status``'s first line: the allocation in force's solve seconds and, while one runs
    off the executor, the re-solve's time so far and its jobs (an older scheduler: none)."""
    assert "solve" not in status_table(reply())[0]   # (fields unset: an older scheduler)
    solving = reply()
    solving.allocation_solve_s, solving.solving_since_s, solving.solving_jobs = 12.345, 4900, 20_000
    assert status_table(solving)[0].endswith(
        "jobs 3  allocation solved in 12.35s  re-solving for 00:01:40 (20,000 jobs)")
    solving.solving_since_s, solving.solving_jobs = -1.0, 0
    assert status_table(solving)[0].endswith("jobs 3  allocation solved in 12.35s")


def slo_reply() -> pb.StatusResponse:
    """At t = 5,000 s, ETAs computed at 4,900 s: job 1's deadline (1,100 s) passed; job 2's
    ETA is 10 minutes past its deadline; job 3's within; job 4 missed its SLO by 100 s; job
    5 met its SLO; job 6 has no SLO."""
    never = {"started_s": -1, "ended_s": -1, "completion_s": -1, "eta_start_s": -1}
    def job(i, state, slo, eta=-1.0, **times):
        return pb.JobStatus(id=i, state=state, total_steps=100, job_type="A3C", scale_factor=1,
                            arrival_s=100.0, slo_s=slo, eta_finish_s=eta,
                            **{**never, **times})
    return pb.StatusResponse(
        round=9, policy="max_sum_throughput_normalized_by_cost_perf_SLOs", round_seconds=60,
        now_s=5000.0, epoch_unix=EPOCH, eta_computed_s=4900.0,
        jobs=[job("1", "queued", 1000.0, 6000.0),
              job("2", "running", 10_000.0, 10_700.0, started_s=200.0),
              job("3", "queued", 10_000.0, 9000.0),
              job("4", "done", 1000.0, ended_s=1200.0, completion_s=1200.0),
              job("5", "done", 1000.0, ended_s=1100.0, completion_s=1100.0),
              job("6", "queued", 0.0, 7000.0)])


def test_the_status_table_flags_each_slo_missed_or_at_risk_and_its_header_counts_them():
    lines = status_table(slo_reply())
    assert lines[0].endswith("jobs 6  SLOs: 1 at risk, 2 missed")
    rows = {line.split()[0]: line for line in lines[2:8]}
    assert rows["1"].endswith("(SLO missed: its deadline passed 01:05:00 ago)")
    assert rows["2"].endswith("(SLO at risk: predicted to finish 00:10:00 past its deadline)")
    assert rows["4"].endswith("(SLO missed by 00:01:40)")
    assert all("SLO" not in rows[i] for i in "356")       # on track, met, none
    assert "SLOs" not in status_table(reply())[0]         # no job with an SLO: no count


def test_status_eta_lists_each_deadline_with_where_its_job_stands():
    status = ClusterStatus.from_pb(slo_reply())
    lines = eta_lines(status)
    assert lines[1].split() == ["id", "start", "finish", "deadline", "(SLO)"]
    rows = {line.split()[0]: line for line in lines[2:]}
    assert set(rows) == {"1", "2", "3", "6"}              # the jobs not ended
    column = lines[1].index("deadline")                   # each deadline under its header
    for i, stands in (("1", "missed"), ("2", "at risk"), ("3", "on track")):
        deadline = 100.0 + status.job(i).slo_s
        assert rows[i][column:] == (f"{date(EPOCH, deadline)} "
                                    f"(+{clock(max(0.0, deadline - 5000.0))}) {stands}")
    assert rows["6"].rstrip().endswith(f"(+{clock(2000.0)})")   # a finish, no deadline
    assert [j.slo_status for j in status.jobs] == ["missed", "at_risk", "on_track", "missed",
                                                   "met", None]
    assert eta_lines(ClusterStatus.from_pb(reply()))[1].split() == ["id", "start", "finish"]


class SloClient:
    """What ``status`` and ``history`` call: one reply, the filters it was asked for."""

    def __init__(self) -> None:
        self.asked: list[dict] = []

    def status_reply(self, **filters):
        self.asked.append(filters)
        return slo_reply()


def test_status_and_history_pick_jobs_by_where_their_slo_stands(monkeypatch, capsys):
    client = SloClient()
    monkeypatch.setattr(jobs_cli, "_client", lambda args: client)
    assert main(["status", "--all", "--slo", "missed,at_risk", "--json"]) == 0
    assert [j["id"] for j in json.loads(capsys.readouterr().out)["jobs"]] == ["1", "2", "4"]
    assert main(["history", "--slo", "met", "--slo", "on_track"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [row.split()[0] for row in rows] == ["3", "5"]
    assert main(["status", "--all"]) == 0                 # no --slo: every job
    assert len(capsys.readouterr().out.splitlines()) == 2 + 6 + 1


def test_an_unknown_slo_status_is_refused_in_one_line_before_any_call(monkeypatch, capsys):
    client = SloClient()
    monkeypatch.setattr(jobs_cli, "_client", lambda args: client)
    assert main(["status", "--slo", "missed,late"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("gavelsched status: error: --slo: unknown status late (one of missed, "
                   "at_risk, unknown, on_track, met)")
    assert client.asked == []
