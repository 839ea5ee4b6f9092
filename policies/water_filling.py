"""Water filling: Pareto-efficient max-min fairness, and hierarchical (entity) policies.

Thesis §5.4.3. Every job's normalised effective throughput rises at a rate given by its
weight until it is *bottlenecked*, i.e. it cannot rise further without another job falling;
then it is frozen and its weight is redistributed inside its entity (fairness: among the
entity's other jobs in proportion to their weights; FIFO: to the next job in arrival
order). Entities share the cluster in proportion to their weights.

Each iteration solves one LP,  max t  s.t.  u(z) >= level + w * t,  either as a cvxpy
program with ``level`` and ``w`` parameters (``backend="cvxpy"``, the reference) or as
sparse matrices handed to the solver (``backend="direct"``, the default, policies/lp.py).
Bottlenecks come from that LP's duals instead of Gavel's MILP: an interior-point solver
returns a strictly complementary dual (Goldman-Tucker), whose positive entries are exactly
the constraints that are tight in *every* optimal allocation, i.e. the jobs that cannot
rise. A job improvable in some optimal allocation always has a zero dual there, so a job is
never frozen too early, and each iteration freezes at least one job (the duals of the
rising jobs sum to 1/Σw > 0). A simplex (vertex) dual keeps the first two properties, since
a positive dual still means the constraint is tight in every optimum, but may freeze fewer
jobs per LP. The direct path also skips the iterations in which jobs only reach their own
caps (``WaterFilling._jump``), and, without pairs, solves each LP over the columns that can
still matter (``prune``, policies/water_filling_live.py): a column no unfrozen job can use
any more is dropped and lowers its job's cap, so with FIFO entities, where the weight moves
to one job at a time, most jobs stop at such a cap and are jumped over too (2,048 jobs in
four FIFO entities: ~70 LPs instead of ~1,500). ``prune=False`` is the method before it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

import numpy as np

from ._lazy import cp
from .base import BACKEND_OPTION, ColumnPolicy, Solution, no_columns, run_precise
from .columns import ZERO, Columns
from .errors import Infeasible, ProblemError, SolverFailed
from .fairness import base_constraints, fairness_utility, max_min_rows
from .lp import LinearProgram, WarmLevel, maximise_level, solve_lp
from .problem import Allocation, Problem
from .problem_json import whole_number
from .water_filling_caps import EntityCaps, cap_constraints, entity_caps, shrink, with_caps
from .water_filling_jump import last_feasible
from .water_filling_live import LiveSteps, column_jobs

log = logging.getLogger(__name__)

# A dual at most this fraction of the largest dual is treated as zero (solver noise).
DUAL_ZERO = 1e-5
# When an LP fails for numerical reasons (floors right at the edge of feasibility), it is
# retried with every floor lowered by these relative amounts in turn. A last resort
# (``WaterFilling._raise`` first tries floors the last allocation meets within capacity):
# what 1e-6 frees an ill-conditioned problem (a job with two types nearly as fast) hands
# to another job ~1e3 times over.
BACKOFFS = (1e-6, 1e-5, 1e-4)
# The final polish may lower a level by at most this relative amount (solver tolerance).
POLISH_SLACK = 1e-8
# A polish whose levels, within capacity, fall short of what they must keep by more than
# this fraction of the total, priced by its duals, is solved again by simplex (``_leaky``):
# 1e-2 of the Pareto slack the tests allow; the leaks found cost 1.2e-4, and the 2,048-job
# benchmark problems' polish leaks 3e-7, not worth a simplex re-solve (0.5 s).
LEAK_LIMIT = 1e-6
# The direct path's solvers (BENCHMARKS.md, solver comparison): Clarabel's interior point
# (strictly complementary duals: every bottlenecked job frozen at once); with
# solver="HIGHS" one warm-started simplex model, whose vertex duals may freeze fewer jobs
# per LP (still never a job that could rise). The polish is one LP, any optimum will do.
DIRECT_SOLVER = "CLARABEL"
POLISH_SOLVER = "CLARABEL"
# Where an interior point cannot polish precisely (every level kept to POLISH_SLACK leaves
# a thin feasible set), a vertex can: HiGHS's interior point with crossover, then its
# simplex should that fail too. On the polish of 10,000 jobs with 8 partners each
# (169,347 columns) the first took 10 s and the simplex 137 s (BENCHMARKS.md, "Water
# filling with pairs at production size").
VERTEX_SOLVERS = ("HIGHS_IPM", "HIGHS")
# Pruned LPs (``prune``) need an interior point's strictly complementary duals to find
# every dead column at once; a vertex dual finds a few per LP, so with HiGHS it is slower
# than the plain method, which HiGHS solvers keep.
PRUNE_SOLVER = "CLARABEL"
# A level within this relative distance of a job's own cap is at the cap. (A threshold only:
# no level is set this far below its cap, see ``WaterFilling._jump``.)
CAP_TOL = 1e-8

# One iteration: (floors, rates) -> (rise, allocation z, duals of the rising constraints).
Step = Callable[[np.ndarray, np.ndarray], tuple[float, np.ndarray, np.ndarray]]


def entity_groups(problem: Problem, row_ids) -> list[tuple[float, str, np.ndarray]]:
    """(entity weight, inner policy, row indices in arrival order) for every entity, where
    ``row_ids`` names the job of each row.

    Without entities the whole problem is one fairness entity. Jobs that name no entity form
    a default fairness entity of weight 1.
    """
    row_ids = list(row_ids)
    if not problem.entities:
        return [(1.0, "fairness", np.arange(len(row_ids)))]
    entity_of = {job.id: job.entity for job in problem.jobs}
    groups = []
    members: dict[str | None, list[int]] = {}
    for i, job_id in enumerate(row_ids):
        entity = entity_of[job_id]
        members.setdefault(entity if entity in problem.entities else None, []).append(i)
    for name, rows in members.items():
        entity = problem.entities.get(name) if name is not None else None
        weight, policy = (entity.weight, entity.policy) if entity else (1.0, "fairness")
        groups.append((weight, policy, np.array(rows)))
    return groups


def rising_weights(groups, job_weight: np.ndarray, frozen: np.ndarray) -> np.ndarray:
    """Rate at which each job's normalised throughput rises in the next iteration (§5.4.3)."""
    w = np.zeros(len(job_weight))
    for entity_weight, policy, rows in groups:
        live = rows[~frozen[rows]]
        if live.size == 0:
            continue
        if policy == "fifo":
            w[live[0]] = entity_weight
        else:
            w[live] = entity_weight * job_weight[live] / job_weight[live].sum()
    return w


def own_caps(U) -> np.ndarray:
    """The highest normalised throughput each job can reach at all: full time on its best
    column (constraint (5.2) bounds ``U_m @ z`` by the largest entry of row m)."""
    return np.asarray(U.max(axis=1).todense()).ravel()


def cap_events(groups, job_weight: np.ndarray, floor: np.ndarray, frozen: np.ndarray,
               caps: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The (levels, frozen) after the next job reaches its own cap if no cluster constraint
    binds first: rising jobs rise at ``rising_weights`` until the earliest cap (§5.4.3);
    None when nothing rises."""
    w = rising_weights(groups, job_weight, frozen)
    rising = w > 0
    if not rising.any():
        return None
    gap = np.full(w.shape, np.inf)
    gap[rising] = np.maximum(caps[rising] - floor[rising], 0.0) / w[rising]
    dt = gap.min()
    level = np.where(rising, floor + w * dt, floor)
    hit = rising & (gap <= dt * (1 + 1e-12) + 1e-15)
    level[hit] = caps[hit]
    return level, frozen | hit


def within_capacity(cols: Columns, z: np.ndarray, limits: EntityCaps | None = None) -> np.ndarray:
    """``z`` with what the solver's tolerance left beyond (5.1)-(5.3) taken off: entries
    clipped to [0, 1], then each column shrunk by the largest overload of its job (5.2) and
    of its types (5.3) (``Columns.repaired`` without its 1e-7 rounding to zero), and of
    its entity's GPU cap (``limits``, policies/water_filling_caps.py)."""
    z = np.clip(z, 0.0, 1.0)
    factor = np.ones_like(z)
    job_load = np.asarray(cols.member @ z).ravel()
    entries = cols.member.tocoo()
    np.minimum.at(factor, entries.col, 1.0 / np.maximum(job_load, 1.0)[entries.row])
    z = z * factor
    type_load = np.asarray(cols.usage @ z).ravel()
    over = type_load > cols.workers
    if not over.any():
        return shrink(z, limits)
    type_shrink = np.where(over, cols.workers / np.maximum(type_load, 1e-300), 1.0)
    factor = np.ones_like(z)
    used = cols.usage.tocoo()
    np.minimum.at(factor, used.col, type_shrink[used.row])
    return shrink(z * factor, limits)


def fitted_floors(cols: Columns, U, floor: np.ndarray, z: np.ndarray,
                  limits: EntityCaps | None = None) -> np.ndarray:
    """``floor`` lowered to the levels of ``z`` within capacity: floors that allocation
    meets exactly. Each LP's optimum meets (5.2)-(5.3) only to the solver's feasibility
    tolerance (~1e-9 of the largest number), and its levels are the next LP's floors, which
    the solver then at times finds infeasible; these floors are feasible by construction
    and lower by that tolerance only, where a back-off lowers every floor by 1e-6."""
    return np.minimum(floor, U @ within_capacity(cols, z, limits))


def _leaky(levels: np.ndarray, keep: np.ndarray, dual: np.ndarray) -> bool:
    """The polish's allocation, within capacity, gives some job ``levels`` below what it
    must ``keep`` by the solver's feasibility tolerance (an interior point's ~1e-9), and the
    keep rows' ``dual`` says that shortfall is worth more than ``LEAK_LIMIT`` of the total
    to others. In an ill-conditioned problem (a job ~170x faster on one type than another,
    in pairs) a shortfall of 6e-9 freed 1e-3 for others, and the 1.3e-9 lost to taking an
    overload of 1.7e-10 off a type freed 1e-4: the allocation was then not Pareto-efficient
    by that much. A vertex (simplex) solution meets the rows to ~1e-15."""
    short = np.maximum(keep - levels, 0.0)
    worth = float(np.maximum(dual[:keep.size], 0.0) @ short)
    return worth > LEAK_LIMIT * max(float(keep.sum()), 1e-12)


def needed_entries(U, z: np.ndarray) -> np.ndarray:
    """The entries of the polished ``z`` below ``ZERO`` (which ``Columns.repaired`` rounds
    to zero as solver noise) that a job needs to keep its level: without them some job of
    theirs would lose more than ``POLISH_SLACK`` of its level. A simplex polish is exact,
    and its vertex may hold such an entry: in an ill-conditioned problem 1.7e-8 of a column
    lifted a job by 1e-7 of its level, and rounding it away freed 1e-4 of the total for
    others (the allocation was then not Pareto-efficient by that much)."""
    tiny = (z > 0.0) & (z <= ZERO)
    if not tiny.any():
        return tiny
    level = U @ np.clip(z, 0.0, 1.0)
    lost = U @ np.where(tiny, z, 0.0)
    hurt = lost > POLISH_SLACK * np.maximum(level, 1e-12)
    return tiny & (np.asarray(abs(U[hurt]).sum(axis=0)).ravel() > 0)


class WaterFilling(ColumnPolicy):
    """``max_min_fairness_water_filling[_perf|_packed]``, hierarchical when the problem has
    entities; an entity's GPU cap (``Entity.max_gpus``) is a row of every LP, so what it
    cannot use goes to the others (policies/water_filling_caps.py). The objective reported
    is the lowest weighted normalised throughput."""

    TRAITS = ColumnPolicy.TRAITS.but(reads={"weight", "entities", "entity"},
                                     rearrangeable=True, options={
        "max_iterations": "stop after this many water-filling LPs (default: until all frozen)",
        "backend": BACKEND_OPTION,
        "prune": "direct path with Clarabel, without pairs: LPs over the live columns of "
                 "active jobs only (policies/water_filling_live.py; default true; false: "
                 "every column in every LP, the reference it is tested against)"})

    def __init__(self, name=None, *, max_iterations: int | None = None, prune: bool = True,
                 **kwargs) -> None:
        super().__init__(name, **kwargs)
        if not isinstance(prune, bool):
            raise ProblemError(f"{self.name}: prune must be true or false, not {prune!r}")
        if max_iterations is not None:
            whole_number(max_iterations, f"{self.name}: max_iterations", 1)
        self.max_iterations = max_iterations
        self.prune = prune

    def _solve(self, problem: Problem) -> Solution:
        cols = self.columns(problem, merge=not problem.entities)
        if cols.num_columns == 0:
            return no_columns(cols)
        rows, U = fairness_utility(cols, weighted=False)  # weights set the rising rates
        solver = self.direct_solver(DIRECT_SOLVER)
        limits = entity_caps(problem, cols)
        _, z = self._fill(problem, cols, rows, U, solver, limits)
        final = self._polish(cols, U, z, solver, limits)
        return Solution(cols.to_rows(final, kept=needed_entries(U, final)),
                        self._objective(U, final, cols.weight[rows]), solver or self.solver)

    def _levels(self, problem: Problem) -> np.ndarray:
        """Every runnable job's water-filling level (normalised effective throughput)
        before the polish: what the tests compare between methods."""
        cols = self.columns(problem, merge=not problem.entities)
        if cols.num_columns == 0:       # no job can run anywhere
            return np.zeros(0)
        rows, U = fairness_utility(cols, weighted=False)
        return self._fill(problem, cols, rows, U, self.direct_solver(DIRECT_SOLVER),
                          entity_caps(problem, cols))[0]

    def _fill(self, problem: Problem, cols: Columns, rows: np.ndarray, U,
              solver: str | None, limits: EntityCaps | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
        """Water filling proper (module docstring): the levels and the last LP's
        allocation. ``limits``: the entities' GPU caps, rows of every LP
        (policies/water_filling_caps.py)."""
        groups = entity_groups(problem, [cols.job_ids[i] for i in rows])
        job_weight = cols.weight[rows]
        k = rows.size
        live = None
        if solver is None:
            step = self._cvxpy_steps(cols, U, limits)
        elif (self.prune and solver == PRUNE_SOLVER and cols.single.all()
              and (column_jobs(U) >= 0).all()):
            live = np.ones(cols.num_columns, dtype=bool)
            step = LiveSteps(*with_caps(*max_min_rows(cols, U), limits), U, live, solver,
                             self.name)
        else:
            step = self._direct_steps(cols, U, solver, limits)
        frozen = np.zeros(k, dtype=bool)
        floor = np.zeros(k)
        z = None
        caps = own_caps(U) if solver is not None else None
        iterations = 0
        limit = self.max_iterations or 4 * k + 10
        while not frozen.all() and iterations < limit:
            w = rising_weights(groups, job_weight, frozen)
            if not (w > 0).any():
                break
            fitted = None if z is None else partial(fitted_floors, cols, U, floor, z, limits)
            rise, z, dual = self._raise(step, floor, w, fitted)
            iterations += 1
            if caps is not None and self._ends_at_caps(floor, w, rise, dual, caps):
                jump = self._jump(step, groups, job_weight, floor, frozen, caps)
                if jump is not None:
                    floor, frozen, w, (rise, z, dual), lps = jump
                    iterations += lps
            floor = np.minimum(floor + w * rise, U @ z)
            stuck = self._bottlenecked(dual, w)
            frozen |= stuck
            if live is not None and not frozen.all() and np.any(
                    floor[stuck] < caps[stuck] * (1 - CAP_TOL)):  # a cluster constraint bound
                caps = self._prune(step, floor, frozen, live)
                frozen |= floor >= caps  # at the cap of their live columns (none: 0)
            log.debug("%s: iteration %d raised by %.4g, froze %d jobs (%d left)", self.name,
                      iterations, rise, stuck.sum(), (~frozen).sum())
        if not frozen.all():
            log.warning("%s: stopped after %d iterations with %d jobs not bottlenecked",
                        self.name, iterations, (~frozen).sum())
        return floor, z

    def _prune(self, step: LiveSteps, floor, frozen, live) -> np.ndarray:
        """Mark the columns no unfrozen job can use any more as dead (in ``live``) and
        return every job's cap over its live columns (policies/water_filling_live.py)."""
        dead = step.dead_columns(floor, frozen)
        live[dead] = False
        step.refresh()
        log.debug("%s: %d columns dead, %d live", self.name, dead.size, live.sum())
        return step.caps

    def _ends_at_caps(self, floor, w, rise, dual, caps) -> bool:
        """True when this step's bottlenecked jobs are exactly at their own caps: no
        cluster constraint stopped the rise, so the next ones may not either."""
        stuck = self._bottlenecked(dual, w)
        reached = floor + w * rise
        return bool(np.all(reached[stuck] >= caps[stuck] * (1 - CAP_TOL)))

    def _jump(self, step: Step, groups, job_weight, floor, frozen, caps):
        """Skip the steps in which jobs only reach their own caps (direct path only).

        Until a cluster constraint binds, water filling is known in closed form: each
        rising job rises at its rate until its cap, where it freezes and its weight moves
        on (``cap_events``). The event states are increasingly high levels, so if one is
        feasible all earlier ones are, and no cluster bottleneck came before it. A search
        of LPs, each the normal step from one event state, finds the last feasible one
        (``last_feasible``, policies/water_filling_jump.py: a gallop and a bisection, cut
        short where the LPs' prices prove states infeasible); the step from it is
        returned, as (floor, frozen, rates, step result, LPs solved). None when even the
        first event after the current state is not feasible.

        The event levels are used as they are: a job that reached its cap stays exactly at
        it, as in the reference's one LP per level. (Lowering every floor by ``CAP_TOL``
        here left capped jobs 1e-8 below their caps, free to move a little time to a type
        nearly as fast, which gave other jobs up to 1e3 times that.) Clarabel solves these
        LPs without the margin, and a job fixed at its cap leaves the pruned LP anyway."""
        states = [(floor, frozen)]
        results: dict[int, tuple] = {}
        lps = 0

        def state(j: int):
            while len(states) <= j + 1:
                nxt = cap_events(groups, job_weight, *states[-1], caps)
                if nxt is None:
                    return None
                states.append(nxt)
            return states[j + 1]

        def probe(j: int):
            nonlocal lps
            at = state(j)
            if at is None:
                return False, None
            w = rising_weights(groups, job_weight, at[1])
            if not (w > 0).any():
                w = (at[1] & ~frozen).astype(float)  # all frozen: any bounded level will do
            lps += 1
            try:
                result = step(at[0], w)
            except SolverFailed:
                return False, None
            except Infeasible:
                return False, prices()
            if result[0] < -CAP_TOL:
                return False, prices()
            results[j] = (w, (max(result[0], 0.0), result[1], result[2]))
            return True, prices()

        def prices():   # the last LP's, as a test of infeasibility (pruned LPs only)
            return step.refutation() if isinstance(step, LiveSteps) else None

        def refuted(j: int, refutation) -> bool:
            at = state(j)
            return at is None or refutation(at[0])

        good = last_feasible(probe, refuted)
        if good < 1:
            return None
        at = state(good)
        w, result = results[good]
        return at[0], at[1], w, result, lps

    def _cvxpy_steps(self, cols: Columns, U, limits: EntityCaps | None = None) -> Step:
        """One iteration's LP as a cvxpy program with ``level`` and ``rate`` parameters, so it
        is compiled once (the reference formulation)."""
        k = U.shape[0]
        level = cp.Parameter(k)
        rate = cp.Parameter(k, nonneg=True)
        z = cp.Variable(cols.num_columns, nonneg=True)
        t = cp.Variable()
        rise = U @ z >= level + cp.multiply(rate, t)
        program = cp.Problem(cp.Maximize(t), [rise, *base_constraints(cols, z),
                                              *cap_constraints(limits, z)])

        def step(floor: np.ndarray, w: np.ndarray):
            level.value, rate.value = floor, w
            value = run_precise(program, self.solver, self.name)
            return value, z.value, rise.dual_value
        return step

    def _direct_steps(self, cols: Columns, U, solver: str,
                      limits: EntityCaps | None = None) -> Step:
        """The same LP as sparse matrices (``max_min_rows`` with the floors on the right and
        the rates as the level's coefficients). With HiGHS one model keeps its simplex basis
        from one iteration to the next; its duals are a vertex's, which is enough: a
        positive dual still proves a job bottlenecked (module docstring)."""
        k = U.shape[0]
        A, b, e = with_caps(*max_min_rows(cols, U), limits)
        model = WarmLevel(A, b, e, precise=True) if solver == "HIGHS" else None

        def step(floor: np.ndarray, w: np.ndarray):
            b[:k], e[:k] = -floor, w
            if model is not None:
                model.update(b, e)
                level = model.solve(self.name)
            else:
                try:
                    level = maximise_level(A, b, e, solver, self.name, precise=True)
                except SolverFailed as err:  # an inaccurate interior point: simplex instead
                    log.debug("%s; solving again with HIGHS", err)
                    level = maximise_level(A, b, e, "HIGHS", self.name, precise=True)
            return level.t, level.z, level.dual[:k]
        return step

    def _polish(self, cols: Columns, U, z: np.ndarray, solver: str | None,
                limits: EntityCaps | None = None) -> np.ndarray:
        """Hand out what the last LP left unused without lowering anyone: maximise the total
        normalised throughput subject to every job keeping its level. This only removes
        solver slack (the levels are already max-min), and makes Pareto efficiency hold to
        the solver's tolerance rather than to the accuracy of the bottleneck test. The levels
        to keep are those of ``z`` within capacity, so they are feasible; an inaccurate
        interior point is solved again at a vertex (``VERTEX_SOLVERS``) rather than the
        polish skipped (one method polished and the other not differ by what the polish
        hands out)."""
        keep = (U @ within_capacity(cols, z, limits)) * (1 - POLISH_SLACK)
        what = f"{self.name} (polish)"
        try:
            if solver is None:
                polished = cp.Variable(cols.num_columns, nonneg=True)
                program = cp.Problem(cp.Maximize(cp.sum(U @ polished)),
                                     [U @ polished >= keep, *base_constraints(cols, polished),
                                      *cap_constraints(limits, polished)])
                run_precise(program, self.solver, what)
                return polished.value
            A, b, _ = with_caps(*max_min_rows(cols, U), limits)
            b[:U.shape[0]] = -keep
            lp = LinearProgram(-np.asarray(U.sum(axis=0)).ravel(), A, b, cols.num_columns)
            first = POLISH_SOLVER if solver == "HIGHS" else solver
            polishers = (first, *(v for v in VERTEX_SOLVERS if v != first))
            for polisher in polishers[:-1]:
                try:
                    result = solve_lp(lp, polisher, what, precise=True)
                except SolverFailed as err:
                    log.debug("%s; solving again at a vertex", err)
                    continue
                if not _leaky(U @ within_capacity(cols, result.x, limits), keep, result.dual):
                    return result.x
                log.debug("%s: %s's levels leak; solving again at a vertex", what, polisher)
            return solve_lp(lp, polishers[-1], what, precise=True).x
        except (Infeasible, SolverFailed) as err:
            log.debug("%s: polish skipped (%s)", self.name, err)
            return z

    def _raise(self, step: Step, floor: np.ndarray, w: np.ndarray,
               fitted: Callable[[], np.ndarray] | None = None):
        """Solve one iteration's LP precisely (its duals decide who is frozen). Floors on
        the very edge of feasibility that the solver finds beyond it are tried again as
        they are with every column (a pruned LP) and then as the levels the last
        allocation meets within capacity (``fitted``, ``fitted_floors``), before every
        floor is backed off (``BACKOFFS``). Returns the rise (>= 0), the allocation and the
        duals of the rising constraints."""
        for backoff in (0.0, *BACKOFFS):
            try:
                rise, z, dual = step(floor * (1 - backoff), w)
                return max(rise, 0.0), z, dual
            except (Infeasible, SolverFailed) as err:
                if backoff == 0.0:
                    retried = self._retry(step, floor, w, fitted)
                    if retried is not None:
                        return retried
                if backoff == BACKOFFS[-1]:
                    raise
                log.debug("%s: %s; lowering the floors", self.name, err)
        raise AssertionError("unreachable")

    def _retry(self, step: Step, floor: np.ndarray, w: np.ndarray,
               fitted: Callable[[], np.ndarray] | None):
        """``_raise``'s tries between the LP as it is and a back-off; None if all fail."""
        tries = []
        if isinstance(step, LiveSteps):  # the pruned LP moved the edge by a tolerance
            tries.append((step.exact, lambda: floor))
        if fitted is not None:  # the floors were beyond capacity by the solver's tolerance
            tries.append((step, fitted))
        for solve, floors in tries:
            try:
                rise, z, dual = solve(floors(), w)
            except (Infeasible, SolverFailed) as err:
                log.debug("%s: %s", self.name, err)
                continue
            return max(rise, 0.0), z, dual
        return None

    @staticmethod
    def _bottlenecked(dual: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Rising jobs whose constraint carries a positive dual: they cannot rise further."""
        dual = np.where(w > 0, np.maximum(dual, 0.0), 0.0)
        top = dual.max()
        stuck = dual > DUAL_ZERO * top
        if not stuck.any():  # cannot happen in exact arithmetic; keep progress guaranteed
            stuck[np.argmax(dual)] = True
        return stuck

    @staticmethod
    def _objective(U, z: np.ndarray, weight: np.ndarray) -> float:
        return float(np.min((U @ z) / weight))

    def evaluate(self, problem: Problem, allocation: Allocation) -> float | None:
        cols = self.columns(problem)
        if cols.num_columns == 0:
            return None
        rows, U = fairness_utility(cols, weighted=False)
        return self._objective(U, cols.z_from(allocation), cols.weight[rows])
