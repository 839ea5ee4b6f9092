"""gavelsched policies: scheduling objectives as cvxpy programs over effective throughput.

Thesis chapter 5 (§5.3.1, §5.4) and chapter 6 (§6.4). ``get_policy(name).solve(problem)``
returns an ``Allocation``.
"""

from .base import Policy
from .errors import Infeasible, PolicyError, ProblemError, SolverFailed, UnknownPolicy
from .jobs import Entity, Job, Pair, is_pair_key, key_members, pair_key
from .problem import Allocation, Problem
from .registry import REGISTRY, UnknownOption, get_policy, policy_class, policy_names, policy_options
from .traits import Traits

__all__ = [
    "REGISTRY",
    "Allocation",
    "Entity",
    "Infeasible",
    "Job",
    "Pair",
    "Policy",
    "PolicyError",
    "Problem",
    "ProblemError",
    "SolverFailed",
    "Traits",
    "UnknownOption",
    "UnknownPolicy",
    "get_policy",
    "is_pair_key",
    "key_members",
    "pair_key",
    "policy_class",
    "policy_names",
    "policy_options",
]
