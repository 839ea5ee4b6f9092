"""The Problem JSON of docs/architecture.md is valid (issue #18): every ```json block of the
doc loads as a ``Problem`` and every registered policy solves it; its Allocation JSON comes
back through ``Allocation.from_dict``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from policies import Allocation, Problem, get_policy
from policies.registry import REGISTRY

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
# Options a policy cannot solve without.
REQUIRED_OPTIONS = {"min_makespan_with_budget": {"budget": 500.0}}


def json_blocks(text: str) -> list[dict]:
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", text, re.S)]


def test_the_doc_has_a_problem_example():
    assert json_blocks(DOC.read_text())


@pytest.mark.parametrize("policy", sorted(REGISTRY))
def test_every_policy_solves_the_doc_examples(policy):
    for block in json_blocks(DOC.read_text()):
        problem = Problem.from_dict(block)
        allocation = get_policy(policy, **REQUIRED_OPTIONS.get(policy, {})).solve(problem)
        keys = {j.id for j in problem.jobs} | {"+".join(p.jobs) for p in problem.pairs}
        assert set(allocation.allocation) <= keys
        again = Allocation.from_dict(json.loads(json.dumps(allocation.to_dict())))
        assert again.allocation.keys() == allocation.allocation.keys()


ROOT = DOC.parents[1]


def test_the_shipped_problem_is_the_docs_example():
    (block,) = json_blocks(DOC.read_text())
    assert json.loads((ROOT / "examples" / "problem.json").read_text()) == block


def test_the_generated_examples_are_what_make_examples_writes():
    import importlib.util
    spec = importlib.util.spec_from_file_location("make_examples",
                                                  ROOT / "examples" / "make_examples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, text in module.files().items():
        assert (ROOT / "examples" / name).read_text() == text, name


def test_no_reference_points_outside_the_repository():
    """The design notes are docs/design.md; relative links in the docs resolve."""
    found = [f"{path.relative_to(ROOT)}:{n}"
             for folder in ("gavelsched", "policies", "simulator", "traces", "workers", "docs",
                            "tests", "benchmarks", "deploy")
             for path in sorted((ROOT / folder).rglob("*")) if path.suffix in (".py", ".md")
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if re.search(r"(?<![\w/])DESIGN\.md", line) and path != Path(__file__)]
    assert not found, f"DESIGN.md is not in the repository (docs/design.md is): {found}"
    for doc in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))):
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", doc.read_text()):
            assert (doc.parent / target).exists(), f"{doc.name}: broken link {target}"
