"""``gavelsched local-cluster``: a scheduler and emulated workers on loopback run a job mix
to the end and write the Simulation result JSON with every job's completion time (here
with the light ``steps`` workload and short rounds; the README's demo runs torch jobs)."""

from __future__ import annotations

import json

from gavelsched.cli import main


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


def test_local_cluster_bad_workers_flag_is_one_line(capsys):
    assert main(["local-cluster", "--workers", "h100=1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "h100" in err[0]
