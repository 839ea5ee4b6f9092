"""The example of docs/api.md runs as written (issue #27): a real scheduler and a real
emulated worker daemon on loopback, a job submitted and waited for, another cancelled,
through ``gavelsched.client`` with the cluster's token."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_the_api_doc_example_runs(capsys):
    (block,) = python_blocks(DOC.read_text())
    exec(compile(block, str(DOC), "exec"), {"__name__": "docs_api_example"})
    printed = capsys.readouterr().out
    assert "'type': 'v100'" in printed and "'alive': True" in printed
