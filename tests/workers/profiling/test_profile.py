"""``gavelsched profile`` measures a worker type's throughput row itself (issue #19): every
catalog job type (thesis Table 5.2) with its family's real network, at the documented size;
``--reduced`` runs the same code path in seconds on a CPU."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from gavelsched.cli import main
from traces.catalog import DEFAULT_CATALOG_PATH, default_catalog
from workers.profiling import architectures, measure

REPO = Path(__file__).resolve().parents[3]
JOB_TYPES = list(default_catalog().job_types)
FAMILIES = list(dict.fromkeys(info.family for info in default_catalog().job_types.values()))
ONE_PER_FAMILY = [next(name for name in JOB_TYPES
                       if default_catalog().job_types[name].family == family)
                  for family in FAMILIES]
KEYS = {"schema", "worker_type", "device", "precision", "reduced", "torch", "cuda",
        "measured_at", "seconds", "steps_per_s", "skipped", "architectures"}
# Parameters of each network as its paper (or torchvision) documents them, in millions.
NETWORK_PARAMS = {"ResNet-50": [25.6], "ResNet-18": [11.2], "A3C": [0.6], "LSTM": [50.0],
                  "Transformer": [51.3], "CycleGAN": [11.4, 11.4, 2.8, 2.8],
                  "Recoder": [10.7]}


@pytest.fixture(autouse=True)
def one_thread():
    """One torch thread: pytest-xdist's workers and the CLI's process share a small machine,
    and oversubscribed OpenMP threads spin-wait on each other."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _profile(tmp_path, *flags: str) -> tuple[dict, str]:
    out = tmp_path / "row.json"
    proc = subprocess.run(
        [sys.executable, "-m", "gavelsched", "profile", "--type", "cpu-test", "-o", str(out),
         "--reduced", "--device", "cpu", *flags],
        cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
        timeout=300)   # `python -m` from the repository root imports its packages
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["row.json"]   # no temp file left
    return json.loads(out.read_text()), proc.stdout


def _check_rates(row: dict, names: list[str], skipped: dict[str, str] | None = None) -> None:
    """``row`` measured exactly ``names``, in order, and skipped exactly the keys of
    ``skipped`` (none by default), each for a reason that contains its value."""
    skipped = skipped or {}
    assert set(row) == KEYS and row["schema"] == "gavelsched-profile/1"
    assert list(row["steps_per_s"]) == names and set(row["skipped"]) == set(skipped)
    assert all(why in row["skipped"][name] and "\n" not in row["skipped"][name]
               for name, why in skipped.items()), row["skipped"]
    assert all(math.isfinite(rate) and rate > 0 for rate in row["steps_per_s"].values())
    families = {default_catalog().job_types[name].family for name in names}
    assert set(row["architectures"]) == families
    assert all("\n" not in text and "REDUCED" in text for text in row["architectures"].values())


def test_cli_measures_every_catalog_job_type(tmp_path):
    row, stdout = _profile(tmp_path)
    _check_rates(row, JOB_TYPES)
    assert row["worker_type"] == "cpu-test" and row["precision"] == "fp32"
    assert row["reduced"] is True and row["device"].startswith("cpu (")
    assert row["torch"] == torch.__version__ and row["measured_at"].endswith("Z")
    assert row["seconds"] > 0
    assert "no Atari emulator" in row["architectures"]["A3C"]
    assert "estimate" in row["architectures"]["Transformer"]
    assert "estimate" in row["architectures"]["Recoder"]
    lines = stdout.splitlines()
    assert lines[1].split() == ["job", "type", "batch", "steps/s", "samples/s"]
    assert [line for line in lines if line.startswith("ResNet-50 (batch size 128)")][0] \
        .split()[4] == "8"   # reduced batch: 128 / 16


def _bf16_lstm_runs_here() -> bool:
    """Whether this CPU runs an LSTM under bf16 autocast. oneDNN has no bf16 LSTM
    primitive on CPUs without AVX-512 (an AMD EPYC VM with AVX only, for one), and
    ``measure`` then skips the LSTM job types, saying why, as it does any job type that
    cannot run."""
    lstm = torch.nn.LSTM(4, 4)
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            lstm(torch.zeros(2, 1, 4))
    except RuntimeError:
        return False
    return True


def test_bf16_reduced_runs_on_cpu_for_a_job_type_subset(tmp_path):
    row, _ = _profile(tmp_path, "--amp", "bf16", "--job-types", ",".join(ONE_PER_FAMILY))
    lstm = [n for n in ONE_PER_FAMILY if default_catalog().job_types[n].family == "LSTM"]
    if _bf16_lstm_runs_here():
        _check_rates(row, ONE_PER_FAMILY)
    else:      # the other families still measured, each LSTM type skipped by name
        _check_rates(row, [n for n in ONE_PER_FAMILY if n not in lstm],
                     skipped={n: "LSTM" for n in lstm})
    assert lstm and row["precision"] == "bf16"


def test_job_types_subset_in_process(tmp_path, capsys):
    out = tmp_path / "row.json"
    subset = ["LM (batch size 80)", "A3C"]
    assert main(["profile", "--type", "k", "-o", str(out), "--reduced", "--device", "cpu",
                 "--seconds-per-type", "0.01", "--job-types", " , ".join(subset)]) == 0
    row = json.loads(out.read_text())
    assert list(row["steps_per_s"]) == subset and set(row["architectures"]) == {"LSTM", "A3C"}
    assert "LM (batch size 80)" in capsys.readouterr().out


@pytest.mark.parametrize("flags, message", [
    (["--type", " "], "--type: empty worker type"),
    (["--type", "k", "--job-types", "A3C,ResNet-7"], "unknown job type 'ResNet-7'; known: "),
    (["--type", "k", "--job-types", ","], "no job type given"),
    (["--type", "k", "--seconds-per-type", "0"], "must be a positive number"),
    (["--type", "k", "--seconds-per-type", "-1"], "must be a positive number"),
    (["--type", "k", "--seconds-per-type", "inf"], "must be a positive number"),
    (["--type", "k", "--amp", "fp16"], "invalid choice: 'fp16'"),
    (["--type", "k", "-o", "/nonexistent-dir/row.json"], "does not exist"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, flags, message):
    argv = ["profile", "-o", str(tmp_path / "row.json"), "--reduced", *flags]
    try:
        code = main(argv)
    except SystemExit as exit_:   # argparse's own refusals
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("gavelsched profile: error: ")
    assert not (tmp_path / "row.json").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_refused_without_cuda(tmp_path, capsys):
    assert main(["profile", "--type", "k", "-o", str(tmp_path / "r.json"), "--device",
                 "cuda"]) == 2
    assert capsys.readouterr().err.strip() == \
        "gavelsched profile: error: --device cuda: CUDA is not available on this machine"


def test_bf16_refused_where_unsupported(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(measure, "bf16_supported", lambda device: False)
    assert main(["profile", "--type", "k", "-o", str(tmp_path / "r.json"), "--device", "cpu",
                 "--amp", "bf16", "--reduced"]) == 2
    assert capsys.readouterr().err.strip() == \
        "gavelsched profile: error: --amp bf16: not supported on cpu of this machine"


@pytest.mark.parametrize("family", FAMILIES)
def test_full_size_networks_have_the_documented_parameter_counts(family):
    trainer = architectures.build(family, torch.device("meta"))   # no memory, nothing run
    counts = [sum(p.numel() for p in model.parameters()) / 1e6 for model in trainer.models]
    assert counts == pytest.approx(NETWORK_PARAMS[family], rel=0.03)
    documented = yaml.safe_load(DEFAULT_CATALOG_PATH.read_text())["meta"]["families"]
    assert sum(counts) == pytest.approx(documented[family]["params_millions"], rel=0.03)
    assert all(p.is_meta for model in trainer.models for p in model.parameters())


@pytest.mark.parametrize("family", FAMILIES)
def test_a_reduced_step_trains_every_network(family):
    torch.manual_seed(0)
    trainer = architectures.build(family, torch.device("cpu"), reduced=True)
    catalog_batch = max(info.batch_size for info in default_catalog().job_types.values()
                        if info.family == family)
    batch = trainer.make_batch(torch.Generator().manual_seed(0),
                               architectures.batch_size(catalog_batch, reduced=True))
    before = [[p.detach().clone() for p in model.parameters()] for model in trainer.models]
    losses = [trainer.step(batch).item() for _ in range(6)]
    assert all(math.isfinite(loss) for loss in losses), losses
    for model, old in zip(trainer.models, before):   # every network's optimizer stepped
        assert any(not torch.equal(p, q) for p, q in zip(model.parameters(), old))
    if family not in ("A3C", "CycleGAN"):   # plain minimisation: the same batch gets easier
        assert losses[-1] < losses[0], losses


def test_a_failing_job_type_is_skipped_with_one_line(monkeypatch):
    real_build = measure.build

    def build(family, device, **kwargs):
        if family == "A3C":
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB\nmore")
        trainer = real_build(family, device, **kwargs)

        def step(batch):
            if batch[0].shape[0] > 64:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 9 GiB")
            return trainer.step(batch)
        return dataclasses.replace(trainer, step=step)

    monkeypatch.setattr(measure, "build", build)
    names = ["A3C"] + [name for name in JOB_TYPES if name.startswith("Recommendation")]
    ticks: list[str] = []
    row = measure.measure_row("k", device="cpu", precision="fp32", reduced=True,
                              job_types=names, seconds_per_type=0.01, progress=ticks.append)
    assert ticks == names
    assert list(row["steps_per_s"]) == names[1:3]   # reduced batches 32 and 64 fit
    assert list(row["skipped"]) == ["A3C"] + names[3:]
    assert row["skipped"]["A3C"] == ("building A3C: OutOfMemoryError: CUDA out of memory. "
                                     "Tried to allocate 2 GiB")
    assert set(row["architectures"]) == {"Recoder"}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_full_size_on_cuda(precision):
    names = ["ResNet-50 (batch size 64)", "Transformer (batch size 128)"]
    row = measure.measure_row("gpu", device="cuda", precision=precision, reduced=False,
                              job_types=names, seconds_per_type=0.5)
    assert row["skipped"] == {} and list(row["steps_per_s"]) == names
    assert all(math.isfinite(rate) and rate > 0 for rate in row["steps_per_s"].values())
    assert row["cuda"] and not row["device"].startswith("cpu") and row["reduced"] is False
    assert set(row["architectures"]) == {"ResNet-50", "Transformer"}
