"""The Problem JSON of docs/architecture.md is valid (issue #18): every ```json block of the
doc loads as a ``Problem`` and every registered policy solves it; its Allocation JSON comes
back through ``Allocation.from_dict``."""

from __future__ import annotations

import json
import re
import subprocess
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


# What lives beside the repository, not in it: the workspace's design notes and style guide
# and the papers' text files. The repository has its own (docs/design.md, docs/style.md) and
# cites a paper by its name and section (Varuna §4).
OUTSIDE = re.compile(r"(?<![\w/.-])(DESIGN|STYLE)\.md\b|\.\./shared\b|(?<![\w.-])papers/"
                     r"|\b(varuna|avgpipe|breadth_first_pipeline|virtualflow|narayanan_thesis\w*)\.txt\b")


def tracked_files() -> list[Path]:
    """Every file of the repository: git's list where there is one, else the tree."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                                check=True).stdout.decode().split("\0")
        return [ROOT / name for name in listed if name and (ROOT / name).is_file()]
    except (OSError, subprocess.CalledProcessError):
        return [p for p in sorted(ROOT.rglob("*")) if p.is_file() and ".git" not in p.parts]


def test_tracked_files_are_listed():
    names = {p.relative_to(ROOT).as_posix() for p in tracked_files()}
    assert {"README.md", "docs/style.md", "pyproject.toml", "tests/cli/test_doc_examples.py"} <= names


def test_no_reference_points_outside_the_repository():
    """No tracked file (source, docs, YAML, README, scripts) names a file outside the
    repository; relative links of every Markdown file resolve inside it (docs/style.md §7)."""
    found = []
    for path in tracked_files():
        data = path.read_bytes()
        if b"\0" in data or path == Path(__file__):
            continue
        for n, line in enumerate(data.decode(errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:80]}")
    assert not found, "files outside the repository named (docs/design.md, docs/style.md " \
                      f"and papers cited by name are the repository's way): {found}"
    root = ROOT.resolve()
    for doc in (p for p in tracked_files() if p.suffix == ".md"):
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", doc.read_text()):
            resolved = (doc.parent / target).resolve()
            assert resolved.exists(), f"{doc.relative_to(ROOT)}: broken link {target}"
            assert resolved.is_relative_to(root), f"{doc.relative_to(ROOT)}: {target} is outside"



def test_every_citation_of_the_style_guide_names_one_of_its_sections():
    """``docs/style.md §N`` (or ``§N.M``) anywhere in the repository is a heading of it."""
    style = ROOT / "docs" / "style.md"
    sections = set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", style.read_text(), re.M))
    assert {"1", "6.5", "8"} <= sections
    cited = [(f"{path.relative_to(ROOT)}:{n}", number)
             for path in tracked_files() if path.suffix in (".py", ".md")
             for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
             for number in re.findall(r"docs/style\.md §(\d+(?:\.\d+)?)", line)]
    assert len(cited) >= 20
    assert [c for c in cited if c[1] not in sections] == []

def test_the_outside_check_can_fail():
    # the bad references are put together at run time, so that this file names none itself
    up, txt = "..", ".txt"
    bad = (f"see {up}/shared/DESIGN.md", "STY" + "LE.md §3", f"(varuna{txt} §4)",
           f"papers/avgpipe{txt}")
    for line in bad:
        assert OUTSIDE.search(line), line
    for line in ("docs/design.md", "docs/style.md §3", "(Varuna §4)", "/shared/checkpoints"):
        assert not OUTSIDE.search(line), line
