"""Gavel's round-based scheduling mechanism (thesis §5.3.2, §5.5): the round planner.

``plan_round(demand, view, config) -> RoundPlan`` is pure. ``ClusterView`` is the set of
workers it may use; a what-if is the same call on an edited copy of the view.
"""

from .placement import Request, place
from .planner import Demand, Placement, PlannerConfig, RoundPlan, plan_round
from .priorities import priorities
from .quota import Quota, entity_quota, holding
from .selection import order_entries, select
from .view import ClusterView, Server

__all__ = [
    "ClusterView", "Demand", "Placement", "PlannerConfig", "Quota", "Request", "RoundPlan",
    "Server", "entity_quota", "holding", "order_entries", "place", "plan_round", "priorities",
    "select",
]
