"""The allocation period in progress, kept across a scheduler restart (thesis §5.5: the X in
force, the time each job received since the last re-solve and the deficit carried from past
periods; docs/runtime.md, "The allocation period goes on").

Without it a restarted scheduler began a period afresh: every job's received time back to
the seed and its deficit gone, so the first plans ranked jobs as if none had run (a job
that had just had its share came first again, one owed time lost its claim). Co-located
pairs (thesis §5.3.1) go with it: without them a space-sharing policy's pairs lost their
time, and the cluster ran their jobs alone, or not at all, until the next reset event.
The steps/s each job and pair was planned on go with it too: a job measured before the
restart is planned on what was measured of it again, and the period is stale only if
what a job or pair is planned on moved past noise from them: a measurement, or priors
applied at this start (``SchedulerCore.resume``; before, such a restart always re-solved
at its first plan). Saved at each plan (``save_period``: ``period.npz`` in the state
directory, written whole and renamed into place) and taken on at the next start
(``resume_period``: ``SchedulerCore.resume``, the same hand-over a forecast's replay
makes). The file is a door: anything it holds that is not a period (unreadable, a shape
that does not match, a number not finite, a start later than now) is refused with one
line, and the period starts afresh as before. A file of one member's rates per row
(written before pairs were kept) is read as such. Under finish-time fairness each job's
Themis t^isolated goes with the period too (thesis §5.4.2, ``PeriodState.isolated``):
before, a restart set every job's back to 0, and the re-solves after it judged each job's
fairness as if it had never run isolated. So does the state the policy carries between
solves (``PeriodState.policy_state``: FIFO's and Gandiva's random generator, Gandiva's
pairs): before, a restart drew FIFO's types from the seed's first draws again, and
Gandiva forgot its pairs.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from policies import Policy, ProblemError

from ..core import PeriodState, SchedulerCore

log = logging.getLogger(__name__)

PERIOD_FILE = "period.npz"


def save_period(path: Path, period: PeriodState) -> None:
    """Write ``period`` to ``path`` (a temporary file renamed into place: a crash of the
    process leaves the old one or the new one; one damaged otherwise is refused at load)."""
    runs = sorted(period.runs.items())
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as out:
        np.savez(out, start_s=np.float64(period.start_s), stale=np.bool_(period.stale),
                 types=np.array(period.types, dtype=str), keys=np.array(period.keys, dtype=str),
                 allocation=period.allocation, received=period.received,
                 deficit=period.deficit, run_keys=np.array([k for k, _ in runs], dtype=str),
                 run_columns=np.array([c for _, (c, _) in runs], dtype=str),
                 run_held_s=np.array([h for _, (_, h) in runs], dtype=np.float64),
                 **{name: value for name, value in (("rates", period.rates),
                                                    ("isolated", period.isolated))
                    if value is not None},
                 **({"policy_state": np.array(json.dumps(dict(period.policy_state)))}
                    if period.policy_state else {}))
    os.replace(tmp, path)


def load_period(path: Path, now: float) -> PeriodState | None:
    """The period saved at ``path``; None when there is none, or (with one warning) when
    the file is not one (module docstring). ``now``: the daemon's time, which its start
    cannot pass."""
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as f:
            got = {name: f[name] for name in f.files}
        return _checked(got, now)
    except Exception as err:     # (a damaged file: zip, npy, numpy or a check of ours)
        log.warning("%s: not an allocation period (%s); the period starts afresh", path,
                    str(err).splitlines()[0] if str(err) else type(err).__name__)
        return None


def resume_period(core: SchedulerCore, path: Path, now: float,
                  admitted: Callable[..., None]) -> None:
    """Take on the period saved at ``path``, if any (``SchedulerCore.resume``), handing the
    jobs it admits to ``admitted`` with the steps/s the period planned each on
    (``Progress.admitted``: they plan on what was measured of them)."""
    period = load_period(path, now)
    if period is not None:
        period = _readable_state(period, core.policy, path)
        planned = ({} if period.rates is None else
                   {key: dict(zip(period.types, row))
                    for key, row in zip(period.keys, period.rates[..., 0].tolist())})
        core.resume(period, lambda job_ids: admitted(job_ids, now, planned))
        log.info("allocation period since %.1f s taken on: the X, received time and deficit "
                 "of %d jobs and pairs%s", period.start_s, len(period.keys),
                 " (stale: re-solved when the re-solve rule allows)"
                 if core.period_state().stale else "")


def _readable_state(period: PeriodState, policy: Policy, path: Path) -> PeriodState:
    """``period``, without the policy's state if the policy could not read it
    (``Policy.check_state``: a hand-edited file, another policy's); before, every solve
    failed on it. The X, received time and deficits are kept."""
    try:
        policy.check_state(period.policy_state)
    except ProblemError as err:
        log.warning("%s: %s; %s starts its state afresh", path, err, policy.name)
        return replace(period, policy_state={})
    return period


def _checked(got: dict[str, np.ndarray], now: float) -> PeriodState:
    """``got``'s arrays as a period; ``ValueError`` naming the first that is not right."""
    start_s = float(got["start_s"])
    if not 0.0 <= start_s <= now + 1.0:
        raise ValueError(f"start_s: must be in [0, now], got {start_s!r}")
    types, keys = _names(got, "types"), _names(got, "keys")
    rates = "rates" in got     # (a file from before the rates were kept has none)
    if rates and got["rates"].ndim == 2:   # (one member's: from before pairs were kept)
        got["rates"] = np.stack([got["rates"], np.zeros_like(got["rates"])], axis=-1)
    for name in ("allocation", "received", "deficit", *(("rates",) if rates else ())):
        a = got[name]
        shape = (len(keys), len(types), *((2,) if name == "rates" else ()))
        if a.dtype.kind != "f" or a.shape != shape:
            raise ValueError(f"{name}: {' x '.join(map(str, shape))} numbers expected, got "
                             f"{a.dtype} {a.shape}")
        if not np.isfinite(a).all():
            raise ValueError(f"{name}: a number that is not finite")
    if any((got[name] < 0).any() for name in ("allocation", "received", "rates") if name in got):
        raise ValueError("allocation, received, rates: a negative number")
    run_keys, run_columns = _names(got, "run_keys"), _names(got, "run_columns", unique=False)
    held = got["run_held_s"]
    if held.shape != (len(run_keys),) or len(run_columns) != len(run_keys) or not (
            np.isfinite(held) & (held >= 0)).all():
        raise ValueError("runs: keys, columns and held seconds do not match")
    isolated = got.get("isolated")
    if isolated is not None and not (
            isolated.dtype.kind == "f" and isolated.shape == (len(keys), 3)
            and np.isfinite(isolated).all() and (isolated[:, :2] >= 0).all()
            and (isolated[:, 2] >= -1).all()):
        raise ValueError(f"isolated: {len(keys)} x 3 finite numbers expected (time and "
                         f"steps/s >= 0, steps left >= -1), got {isolated.dtype} "
                         f"{isolated.shape}")
    return PeriodState(start_s, types, keys, got["allocation"], got["received"],
                       got["deficit"], bool(got["stale"]),
                       {k: (c, float(h)) for k, c, h in zip(run_keys, run_columns, held)},
                       got["rates"] if rates else None, isolated, _policy_state(got))


def _policy_state(got: dict[str, np.ndarray]) -> dict:
    """The policy's state the file keeps (a JSON object; none: empty); ``ValueError`` or
    ``TypeError`` for anything else. What it holds is the policy's to check, as at any
    solve."""
    if "policy_state" not in got:
        return {}
    text = got["policy_state"]
    if text.dtype.kind != "U" or text.ndim != 0:
        raise ValueError("policy_state: a JSON text expected")
    try:
        state = json.loads(str(text))
    except (ValueError, RecursionError) as err:
        raise ValueError(f"policy_state: not JSON ({str(err)[:100]})") from None
    if not isinstance(state, dict):
        raise TypeError("policy_state: not a JSON object")
    return state


def _names(got: dict[str, np.ndarray], name: str, unique: bool = True) -> tuple[str, ...]:
    a = got[name]
    if a.ndim != 1 or a.dtype.kind != "U":
        raise ValueError(f"{name}: a list of names expected")
    names = tuple(str(x) for x in a)
    if unique and len(set(names)) != len(names):
        raise ValueError(f"{name}: a name twice")
    return names
