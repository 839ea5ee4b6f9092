"""The README works as written (issue #18): every command of its ```bash blocks runs, in
the block's order, with ``gavelsched`` on PATH, in a fresh temp dir per block holding a
copy of ``examples/`` (the README's commands run from the repository root). What the test
changes, all of it here:

- **Not run** (``NOT_RUN``): ``pip install`` (this checkout is the package under test; CI
  runs the same install) and ``python -m pytest`` (this suite). In ``a && b`` only those
  parts are left out.
- **Sizes** (``SIZES``): fewer jobs, one seed, a window that fits; nothing else of a command
  changes.
- **Real hosts**: the block that starts ``gavelsched scheduler`` and ``gavelsched worker``
  runs against a real local cluster. Those two run in the background until the block ends
  (the test waits for the scheduler's "listening" line and the worker's "registered" log);
  ``export NAME=VALUE`` sets the environment of the commands after it. ``HOSTS``: the
  hosts become 127.0.0.1, the fixed ports free ones, the system folders folders of the temp
  dir, where the test first puts what the README says you bring: the TLS certificate
  ``server.pem`` for the scheduler's address, its key and ``ca.pem``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gavelsched.daemon.local import free_port, kill_tree, subprocess_env, wait_until
from tests.daemon.test_tls import make_ca_and_server_cert

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
NOT_RUN = {"pip install": "installs this checkout, which the test already runs on",
           "python -m pytest": "the test suite itself"}
SMALL_TRACE, SMALL_DEMO = 30, 1


def _jobs(match: re.Match, command: str) -> str:
    small = SMALL_DEMO if "local-cluster" in command else SMALL_TRACE
    return f"--jobs {min(int(match[1]), small)}"


SIZES = [(r"--jobs (\d+)", _jobs),
         (r"--window \d+:\d+", lambda m, c: f"--window {SMALL_TRACE // 3}:{2 * SMALL_TRACE // 3}"),
         (r"--seeds [\d,]+", lambda m, c: "--seeds 0")]
DAEMONS = {"gavelsched scheduler": "listening on port", "gavelsched worker": "registered as server"}
SYSTEM_DIRS = r"(?<![\w.])(/etc/gavelsched|/var/lib/|/shared/)"
PORTS = r"(?<=:)(50060|50061|9100)\b"


def blocks() -> list[tuple[int, str]]:
    """Each ```bash block of the README and the line it starts on."""
    text = README.read_text()
    return [(text[:m.start()].count("\n") + 2, m[1])
            for m in re.finditer(r"```bash\n(.*?)```", text, re.S)]


def commands(block: str) -> list[str]:
    """The block's commands: comment lines dropped, continuations joined, a heredoc kept
    whole with its command."""
    out, lines = [], iter(block.splitlines())
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        while line.endswith("\\"):
            line = line[:-1] + next(lines).strip()
        heredoc = re.search(r"<<'?(\w+)'?", line)
        if heredoc:
            body = []
            for more in lines:
                body.append(more)
                if more == heredoc[1]:
                    break
            line = "\n".join([line, *body])
        out.append(line)
    return out


def runnable(command: str) -> str | None:
    """The command without its parts in ``NOT_RUN``, sized down; None if nothing is left."""
    parts = [p for p in command.split(" && ")
             if not any(p.strip().startswith(skip) for skip in NOT_RUN)]
    if not parts:
        return None
    command = " && ".join(parts)
    for pattern, size in SIZES:
        command = re.sub(pattern, lambda m: size(m, command), command)
    return command


class Hosts:
    """The real-hosts substitutions of one block, in ``root``."""

    def __init__(self, root: Path) -> None:
        self.root, self.ports = root, {}
        etc = root / "etc" / "gavelsched"
        etc.mkdir(parents=True)
        made = make_ca_and_server_cert(etc)
        for name, as_named in (("cert", "server.pem"), ("key", "server-key.pem")):
            made[name].rename(etc / as_named)

    def __call__(self, command: str) -> str:
        command = re.sub(SYSTEM_DIRS, lambda m: f"{self.root}{m[1]}", command)
        command = re.sub(PORTS, lambda m: str(self.ports.setdefault(m[1], free_port())), command)
        return command.replace("sched.example", "127.0.0.1").replace("0.0.0.0", "127.0.0.1")


def test_every_block_has_commands_and_none_is_left_out_silently():
    found = [c for _, block in blocks() for c in commands(block)]
    assert len(found) >= 30
    skipped = [c for c in found if runnable(c) is None]
    assert all("pip install" in c or "pytest" in c for c in skipped), skipped


@pytest.mark.parametrize("line,block", blocks(), ids=[f"README.md:{n}" for n, _ in blocks()])
def test_readme_block_runs(line, block, tmp_path):
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "gavelsched").write_text(f'#!/bin/sh\nexec {sys.executable} -m gavelsched "$@"\n')
    (shim / "gavelsched").chmod(0o755)
    env = {**subprocess_env(), "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}"}
    env.pop("GAVEL_SCHEDULER", None)
    hosts = Hosts(tmp_path) if any(d in block for d in DAEMONS) else (lambda c: c)
    daemons: list[subprocess.Popen] = []
    try:
        for command in filter(None, map(runnable, commands(block))):
            command = hosts(command)
            export = re.fullmatch(r"export (\w+)=(\S+)", command)
            if export:
                env[export[1]] = export[2]
                continue
            daemon = next((ready for start, ready in DAEMONS.items()
                           if command.startswith(start)), None)
            if daemon:
                daemons.append(_background(command, daemon, tmp_path, env, len(daemons)))
                continue
            done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, (f"README.md:{line}: `{command}` exited "
                                          f"{done.returncode}\n{done.stdout[-2000:]}"
                                          f"\n{done.stderr[-2000:]}")
        # what the block made is in tour/ (the README says so, and git ignores it); the
        # rest is this test's: the examples, the shim, the daemons' logs, the hosts' dirs
        ours = {"examples", "bin", "tour", "etc", "var", "shared",
                *(f"daemon{n}.log" for n in range(len(daemons)))}
        stray = sorted(p.name for p in tmp_path.iterdir() if p.name not in ours)
        assert not stray, f"README.md:{line}: the block wrote {stray} outside tour/"
    finally:
        for proc in reversed(daemons):
            kill_tree(proc.pid)
            proc.wait()


def _background(command: str, ready: str, cwd: Path, env: dict, n: int) -> subprocess.Popen:
    """Start a daemon's command; return once its output shows ``ready``."""
    log = cwd / f"daemon{n}.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=cwd, env=env,
                                stdout=out, stderr=subprocess.STDOUT)
    wait_until(lambda: ready in log.read_text() or proc.poll() is not None, 120,
               f"`{command}` to start")
    assert proc.poll() is None, f"`{command}` exited {proc.returncode}:\n{log.read_text()}"
    return proc


def test_git_ignores_what_the_tour_makes():
    done = subprocess.run(["git", "check-ignore", "-q", "tour/trace.jsonl"], cwd=ROOT)
    if done.returncode == 128:
        pytest.skip("not a git checkout")
    assert done.returncode == 0, ".gitignore does not name tour/"

