"""``gavelsched user add|list|remove`` (``gavelsched/cli/users.py``): the token alone on the
last line and only its hash in the users file; bad input exits 2 with one line."""

from __future__ import annotations

import argparse
import stat
from pathlib import Path

import pytest

from gavelsched import cli
from gavelsched.cli import main
from gavelsched.cli import users as user_cli
from gavelsched.daemon.users import load_users
from gavelsched.rpc.identity import USER, Caller, Identities, token_hash

CLUSTER = """\
listen: 127.0.0.1:0
policy: max_min_fairness
users_file: {users_file}
entities:
  team-a: {{weight: 2, policy: fairness, max_gpus: 8}}
  team-b: {{weight: 1}}
"""


@pytest.fixture(autouse=True)
def _registered(monkeypatch):
    """The ``user`` command as ``gavelsched.cli`` registers it (a no-op once it does)."""
    monkeypatch.setitem(cli.COMMAND_MODULES, "user", "users")
    if "users" not in cli.COMMANDS:
        monkeypatch.setattr(cli, "COMMANDS", (*cli.COMMANDS, "users"))


def _cluster(folder: Path, users_file: str = "users.yaml", text: str | None = None) -> Path:
    path = folder / "cluster.yaml"
    path.write_text(text if text is not None else CLUSTER.format(users_file=users_file))
    return path


def _run(capsys, *argv: str) -> tuple[int, list[str], list[str]]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out.splitlines(), err.splitlines()


def test_add_prints_the_token_alone_on_the_last_line(tmp_path, capsys):
    config = _cluster(tmp_path)
    rc, out, err = _run(capsys, "user", "add", "alice", "--role", "user", "--entity",
                        "team-a", "--config", str(config))
    assert rc == 0, err
    token = out[-1]
    assert token == token.strip() and " " not in token and len(token) == 43
    users_file = tmp_path / "users.yaml"
    assert str(users_file) in out[0] and "alice" in out[0]
    assert any("gavelsched reload" in line for line in out[:-1])
    text = users_file.read_text()
    assert token not in text and token_hash(token) in text
    assert stat.S_IMODE(users_file.stat().st_mode) == 0o600
    assert Identities("daemon", load_users(users_file)).identify(token) == \
        Caller("alice", USER, frozenset({"team-a"}))


def test_users_file_is_relative_to_the_config_folder(tmp_path, capsys, monkeypatch):
    (tmp_path / "etc").mkdir()
    config = _cluster(tmp_path / "etc", users_file="people.yaml")
    monkeypatch.chdir(tmp_path)
    rc, out, _ = _run(capsys, "user", "add", "root", "--role", "admin", "--config",
                      "etc/cluster.yaml")
    assert rc == 0
    assert [u.name for u in load_users(tmp_path / "etc" / "people.yaml")] == ["root"]
    assert not (tmp_path / "people.yaml").exists() and config.exists()


def test_list_and_remove(tmp_path, capsys):
    config = str(_cluster(tmp_path))
    rc, out, _ = _run(capsys, "user", "list", "--config", config)
    assert rc == 0 and out == [f"no users in {tmp_path / 'users.yaml'}"]
    _run(capsys, "user", "add", "alice", "--role", "user", "--entity", "team-a",
         "--entity", "team-b", "--config", config)
    rc, out, _ = _run(capsys, "user", "add", "root", "--role", "admin", "--max-jobs", "500",
                      "--config", config)
    assert "at most 500 unfinished jobs" in out[0]
    rc, out, _ = _run(capsys, "user", "list", "--config", config)
    assert rc == 0
    assert out[0].split() == ["NAME", "ROLE", "MAX", "JOBS", "ENTITIES"]
    assert out[1].split() == ["alice", "user", "-", "entities:", "team-a,", "team-b"]
    assert out[2].split()[:3] == ["root", "admin", "500"]
    assert [u.max_jobs for u in load_users(tmp_path / "users.yaml")] == [None, 500]
    rc, out, _ = _run(capsys, "user", "remove", "alice", "--config", config)
    assert rc == 0 and "gavelsched reload" in out[-1]
    assert [u.name for u in load_users(tmp_path / "users.yaml")] == ["root"]


# (case, argv after `user`, cluster YAML (None: the default), words of the one line)
BAD = [
    ("a duplicate user", ["add", "alice", "--role", "user"], None,
     ["user 'alice' already exists"]),
    ("an unknown entity", ["add", "bob", "--role", "user", "--entity", "team-z"], None,
     ["unknown entity 'team-z'", "team-a, team-b"]),
    ("a reserved name", ["add", "daemon", "--role", "admin"], None, ["reserved"]),
    ("no jobs at all", ["add", "bob", "--role", "user", "--max-jobs", "0"], None,
     ["max_jobs must be an integer >= 1", "got 0"]),
    ("a bad name", ["add", "bob smith", "--role", "user"], None, ["name must"]),
    ("no users_file key", ["add", "bob", "--role", "user"], "listen: 127.0.0.1:0\n",
     ["cluster.yaml: missing key 'users_file'"]),
    ("users_file not a path", ["add", "bob", "--role", "user"], "users_file: [1]\n",
     ["users_file must be a path"]),
    ("entities not a mapping", ["add", "bob", "--role", "user"],
     "users_file: u.yaml\nentities: [team-a]\n", ["entities must be a mapping"]),
    ("no entities block", ["add", "bob", "--role", "user", "--entity", "team-a"],
     "users_file: u.yaml\n", ["unknown entity 'team-a' (the cluster's: none)"]),
    ("a bad cluster YAML", ["add", "bob", "--role", "user"], "users_file: [\n",
     ["cluster.yaml: bad YAML"]),
    ("a cluster YAML not a mapping", ["add", "bob", "--role", "user"], "- 1\n",
     ["expected a mapping"]),
    ("remove a user who is not there", ["remove", "carol"], None, ["no user 'carol'"]),
]


@pytest.mark.parametrize(("case", "argv", "cluster_yaml", "words"), BAD,
                         ids=[row[0] for row in BAD])
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, case, argv, cluster_yaml, words):
    config = _cluster(tmp_path, text=cluster_yaml)
    if cluster_yaml is None:
        assert _run(capsys, "user", "add", "alice", "--role", "user", "--config",
                    str(config))[0] == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    rc, out, err = _run(capsys, "user", *argv, "--config", str(config))
    assert rc == 2
    assert len(err) == 1, err
    assert err[0].startswith("gavelsched user: error: ")
    for word in words:
        assert word in err[0]
    assert not any(len(line) == 43 and " " not in line for line in out)   # no token printed
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_missing_config_exits_2(tmp_path, capsys):
    rc, _, err = _run(capsys, "user", "list", "--config", str(tmp_path / "nope.yaml"))
    assert rc == 2 and len(err) == 1 and "No such file" in err[0]


def test_register_on_a_fresh_parser():
    """The module stands alone: ``register`` adds ``user`` with its three actions."""
    parser = argparse.ArgumentParser()
    user_cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["user", "add", "bob", "--role", "user", "--entity", "a",
                              "--entity", "b", "--config", "c.yaml"])
    assert (args.func, args.name, args.role, args.entity, args.config) == \
        (user_cli.add_cmd, "bob", "user", ["a", "b"], "c.yaml")
    assert parser.parse_args(["user", "list", "--config", "c"]).func is user_cli.list_cmd
    assert parser.parse_args(["user", "remove", "x", "--config", "c"]).func is \
        user_cli.remove_cmd
