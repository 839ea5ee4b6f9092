"""``gavelsched.client`` loads its parts when first named (PEP 562): every CLI command
imports its errors, and ``gavelsched simulate`` never needs the client, the records or the
status tables behind it. Each check runs in a fresh interpreter (``sys.modules`` of the
test process already holds them)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

PARTS = ("gavelsched.client.api", "gavelsched.client.records", "gavelsched.client.request",
         "gavelsched.client.status")


def _loaded(script: str) -> list[str]:
    """The client's parts in ``sys.modules`` after ``script``, in a fresh interpreter."""
    script = textwrap.dedent(script) + (
        f"\nimport json, sys\nprint(json.dumps([m for m in {PARTS!r} if m in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, timeout=120)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_simulation_from_the_cli_loads_no_client_part():
    assert _loaded("""
        import contextlib, io
        from gavelsched.cli import main
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            assert main(["simulate", "--jobs", "5"]) == 0
    """) == []


def test_every_name_is_there_when_named():
    assert _loaded("""
        import gavelsched.client as client
        names = [name for name in client.__all__ if getattr(client, name) is None]
        assert names == [], names
        from gavelsched.client import JobRequest, connect, ClusterStatus
        assert JobRequest.__module__ == "gavelsched.client.request"
        assert set(client.__all__) <= set(dir(client))
        try:
            client.nothing_of_that_name
        except AttributeError as err:
            assert "nothing_of_that_name" in str(err)
        else:
            raise AssertionError("an unknown name was found")
    """) == list(PARTS)
