"""Admission control (``policies/admission.py``): the new jobs taken in order of arrival,
each admitted when it fits with those admitted before it; a run of admissions found by
bisection; past ``tries`` refusals, the rest of a burst refused with them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from policies.admission import TRIES, refused


def capacity(sizes: list[int], room: int):
    """A feasibility test: the candidates' sizes fit in ``room``, and the calls it got."""
    calls = []

    def feasible(some) -> bool:
        calls.append(list(some))
        return sum(sizes[k] for k in some) <= room
    return feasible, calls


def greedy(sizes: list[int], room: int) -> list[int]:
    """The definition, one candidate at a time."""
    used, out = 0, []
    for k, size in enumerate(sizes):
        if used + size <= room:
            used += size
        else:
            out.append(k)
    return out


def test_a_later_job_that_fits_is_admitted_past_one_that_does_not():
    feasible, _ = capacity([3, 5, 1, 4, 1], 6)
    assert refused(5, feasible) == [1, 3]
    assert refused(5, feasible, tries=1) == [1, 2, 3, 4]     # a burst: the rest with it


def test_the_rest_that_fits_after_the_last_try_is_admitted():
    """Hypothesis's example: the 8th refusal (the last try) was followed by a job that
    fits; it was refused with "the rest", though no job after it was refused."""
    sizes, room = [1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1], 5
    feasible, _ = capacity(sizes, room)
    assert refused(len(sizes), feasible) == greedy(sizes, room) == list(range(3, 11))


@given(st.lists(st.integers(1, 9), min_size=1, max_size=200), st.integers(0, 60))
def test_it_is_greedy_admission_in_order_of_arrival(sizes, room):
    if sum(sizes) <= room:
        return                              # (``refused`` is called when all do not fit)
    feasible, calls = capacity(sizes, room)
    want = greedy(sizes, room)
    got = refused(len(sizes), feasible)
    if len(want) <= TRIES:
        assert got == want
    else:                                   # the first TRIES refusals, then the rest
        assert got[:TRIES] == want[:TRIES] and got == want[:TRIES] + [
            k for k in range(want[TRIES - 1] + 1, len(sizes))]
    # each refusal costs a bisection, not a call a candidate
    assert len(calls) <= (min(len(want), TRIES) + 1) * (len(sizes).bit_length() + 1)
