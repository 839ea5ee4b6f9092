"""The users file (``gavelsched.daemon.users``): its format, every refusal (one line naming
the file and the user), atomic writes with mode 0600, a file that never holds a token, and
a fuzzed door that raises nothing but ``UsersError``."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gavelsched.daemon import users as users_mod
from gavelsched.daemon.users import (
    UsersError,
    add_user,
    list_users,
    load_users,
    parse_users,
    remove_user,
    render,
)
from gavelsched.rpc.identity import ADMIN, USER, Caller, Identities, UserEntry, token_hash

FUZZ = settings(max_examples=int(os.environ.get("GAVEL_FUZZ_EXAMPLES", "80")), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
H1, H2 = token_hash("one"), token_hash("two")
ENTITIES = {"team-a", "team-b"}


def _file(folder: Path, content: str | bytes, mode: int = 0o600) -> Path:
    path = folder / "users.yaml"
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    path.chmod(mode)
    return path


def test_the_documented_format_loads(tmp_path):
    path = _file(tmp_path, f"""
users:
  - {{name: alice, role: user, entities: [team-a], token_sha256: "{H1}"}}
  - name: root.ops_1
    role: admin
    token_sha256: {H2}
""")
    assert load_users(path, ENTITIES) == (
        UserEntry("alice", USER, frozenset({"team-a"}), H1),
        UserEntry("root.ops_1", ADMIN, frozenset(), H2))


@pytest.mark.parametrize("content", ["", "# nothing yet\n", "users:\n", "users: []\n"])
def test_an_empty_file_has_no_users(tmp_path, content):
    assert load_users(_file(tmp_path, content)) == ()


def test_the_default_entity_may_be_named_and_admin_is_a_name(tmp_path):
    path = _file(tmp_path, f'users: [{{name: admin, role: user, entities: ["", team-b], '
                           f'token_sha256: "{H1}"}}]\n')
    assert load_users(path, ENTITIES)[0].entities == frozenset({"", "team-b"})


def _entry(**fields) -> dict:
    return {"name": "bob", "role": "user", "token_sha256": H1, **fields}


# (case, file content, words the one line must hold)
REFUSALS = [
    ("not UTF-8", b"users: [\xff]\n", ["not UTF-8 text at line 1"]),
    ("bad YAML", "users: [\n", ["bad YAML"]),
    ("a bad date", "users: 2024-13-45\n", ["bad YAML"]),
    ("not a mapping", "- alice\n", ["expected a mapping with the key 'users'"]),
    ("an unknown top key", "people: []\n", ["unknown key 'people'"]),
    ("users not a list", {"users": {"alice": 1}}, ["users must be a list"]),
    ("an entry not a mapping", {"users": ["alice"]}, ["users[0]", "expected a mapping"]),
    ("an unknown entry key", {"users": [_entry(token="x")]},
     ["users[0] (bob)", "unknown key 'token'"]),
    ("a missing name", {"users": [_entry(name=None)]}, ["users[0]", "missing key 'name'"]),
    ("a missing role", {"users": [{"name": "bob", "token_sha256": H1}]},
     ["users[0] (bob)", "missing key 'role'"]),
    ("a missing hash", {"users": [{"name": "bob", "role": "user"}]},
     ["users[0] (bob)", "missing key 'token_sha256'"]),
    ("a bad role", {"users": [_entry(role="root")]},
     ["users[0] (bob)", "role must be admin or user, got 'root'"]),
    ("the daemon role", {"users": [_entry(role="daemon")]}, ["role must be admin or user"]),
    ("a name with a space", {"users": [_entry(name="bob smith")]}, ["users[0]", "name must"]),
    ("a name starting with a dot", {"users": [_entry(name=".bob")]}, ["name must"]),
    ("a name too long", {"users": [_entry(name="b" * 65)]}, ["name must"]),
    ("a number as a name", {"users": [_entry(name=7)]}, ["name must"]),
    ("a reserved name", {"users": [_entry(name="daemon")]}, ["(daemon)", "reserved"]),
    ("the open cluster's name", {"users": [_entry(name="anonymous")]}, ["reserved"]),
    ("the scheduler's name", {"users": [_entry(name="scheduler")]}, ["reserved"]),
    ("a token instead of its hash", {"users": [_entry(token_sha256="s3cret")]},
     ["users[0] (bob)", "token_sha256 must be 'sha256:' and 64 lowercase hex"]),
    ("an upper-case hash", {"users": [_entry(token_sha256=H1.upper())]}, ["token_sha256"]),
    ("a short hash", {"users": [_entry(token_sha256=H1[:-1])]}, ["token_sha256"]),
    ("entities not a list", {"users": [_entry(entities="team-a")]}, ["entities must be a list"]),
    ("an entity not text", {"users": [_entry(entities=[3])]}, ["entities: each must be"]),
    ("an entity with a newline", {"users": [_entry(entities=["a\nb"])]}, ["entities"]),
    ("an unknown entity", {"users": [_entry(entities=["team-z"])]},
     ["users[0] (bob)", "unknown entity 'team-z'", "team-a, team-b"]),
    ("no jobs at all", {"users": [_entry(max_jobs=0)]},
     ["users[0] (bob)", ("max_jobs must be an integer >= 1 (the most unfinished jobs at "
                         "once), got 0")]),
    ("a fraction of a job", {"users": [_entry(max_jobs=2.5)]}, ["max_jobs must be"]),
    ("jobs as text", {"users": [_entry(max_jobs="100")]}, ["max_jobs must be"]),
    ("jobs as a boolean", {"users": [_entry(max_jobs=True)]}, ["max_jobs must be"]),
    ("a duplicate user", {"users": [_entry(), _entry(token_sha256=H2)]},
     ["users[1] (bob)", "duplicate user, also users[0]"]),
    ("a duplicate token hash", {"users": [_entry(), _entry(name="carol")]},
     ["users[1] (carol)", "token_sha256 is also users[0]'s (bob)"]),
]


@pytest.mark.parametrize(("case", "content", "words"), REFUSALS,
                         ids=[row[0] for row in REFUSALS])
def test_refusals_are_one_line_naming_the_file(tmp_path, case, content, words):
    if isinstance(content, dict):
        content = yaml.safe_dump(content)
    path = _file(tmp_path, content)
    with pytest.raises(UsersError) as err:
        load_users(path, ENTITIES)
    line = str(err.value)
    assert "\n" not in line
    assert line.startswith(f"{path}: ")
    for word in words:
        assert word in line


def test_a_missing_file_is_one_line(tmp_path):
    with pytest.raises(UsersError, match="No such file"):
        load_users(tmp_path / "nope.yaml")
    assert list_users(tmp_path / "nope.yaml") == ()


def test_without_known_entities_any_entity_passes(tmp_path):
    path = _file(tmp_path, yaml.safe_dump({"users": [_entry(entities=["team-z"])]}))
    assert load_users(path)[0].entities == frozenset({"team-z"})


def test_a_file_writable_by_others_is_refused_readable_is_warned(tmp_path, caplog):
    path = _file(tmp_path, yaml.safe_dump({"users": [_entry()]}), mode=0o620)
    with pytest.raises(UsersError, match="writable by group or others .*chmod 600"):
        load_users(path)
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger=users_mod.__name__):
        assert len(load_users(path)) == 1
    assert "readable by group or others (mode 644)" in caplog.text
    caplog.clear()
    path.chmod(0o600)
    with caplog.at_level(logging.WARNING, logger=users_mod.__name__):
        load_users(path)
    assert not caplog.text


def test_add_user_writes_the_hash_never_the_token(tmp_path):
    path = tmp_path / "users.yaml"
    token = add_user(path, "alice", USER, ["team-a"], known_entities=ENTITIES)
    root = add_user(path, "root", ADMIN, [], known_entities=ENTITIES)
    assert len(token) == 43 and token != root
    text = path.read_text()
    assert token not in text and root not in text
    assert token_hash(token) in text and token_hash(root) in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    users = load_users(path, ENTITIES)
    assert [u.name for u in users] == ["alice", "root"]
    ids = Identities("daemon-secret", users)
    assert ids.identify(token) == Caller("alice", USER, frozenset({"team-a"}))
    assert ids.identify(root) == Caller("root", ADMIN)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["users.yaml"]   # no temp left


def test_add_user_makes_a_private_file_even_over_a_readable_one(tmp_path):
    path = _file(tmp_path, "users: []\n", mode=0o644)
    add_user(path, "alice", USER, [])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize(("name", "role", "entities", "known", "words"), [
    ("alice", USER, [], None, ["user 'alice' already exists"]),
    ("bob", "root", [], None, ["new user (bob)", "role must be admin or user"]),
    ("bob smith", USER, [], None, ["new user", "name must"]),
    ("daemon", USER, [], None, ["reserved"]),
    ("bob", USER, ["team-z"], ENTITIES, ["new user (bob)", "unknown entity 'team-z'"]),
    ("bob", USER, ["team-a"], set(), ["unknown entity 'team-a' (the cluster's: none)"]),
])
def test_add_user_refusals_leave_the_file_as_it_was(tmp_path, name, role, entities, known,
                                                    words):
    path = tmp_path / "users.yaml"
    add_user(path, "alice", USER, [])
    before = path.read_bytes()
    with pytest.raises(UsersError) as err:
        add_user(path, name, role, entities, known_entities=known)
    assert "\n" not in str(err.value)
    for word in words:
        assert word in str(err.value)
    assert path.read_bytes() == before


def test_add_user_refuses_to_rewrite_a_bad_file(tmp_path):
    path = _file(tmp_path, "users: [{name: x}]\n")
    with pytest.raises(UsersError, match=r"users\[0\] \(x\): missing key 'role'"):
        add_user(path, "alice", USER, [])
    assert path.read_text() == "users: [{name: x}]\n"


def test_add_user_in_a_missing_folder_is_one_line(tmp_path):
    with pytest.raises(UsersError, match="no such folder"):
        add_user(tmp_path / "nope" / "users.yaml", "alice", USER, [])


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "users.yaml"
    add_user(path, "alice", USER, [])
    before = path.read_bytes()

    def broken(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(users_mod.os, "replace", broken)
    with pytest.raises(UsersError, match="cannot write: No space left on device"):
        add_user(path, "bob", USER, [])
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["users.yaml"]


def test_the_write_is_a_rename_of_a_synced_temp_in_the_same_folder(tmp_path, monkeypatch):
    path = tmp_path / "users.yaml"
    seen: list[tuple[str, str]] = []
    synced: list[int] = []
    real_replace, real_fsync = os.replace, os.fsync

    def replace(src, dst):
        seen.append((str(src), str(dst)))
        assert stat.S_IMODE(os.stat(src).st_mode) == 0o600
        real_replace(src, dst)

    def fsync(fd):
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(users_mod.os, "replace", replace)
    monkeypatch.setattr(users_mod.os, "fsync", fsync)
    add_user(path, "alice", USER, [])
    [(src, dst)] = seen
    assert Path(src).parent == tmp_path and dst == str(path)
    assert len(synced) == 2                 # the temp file, then the folder


def test_remove_user(tmp_path):
    path = tmp_path / "users.yaml"
    add_user(path, "alice", USER, [])
    bob = add_user(path, "bob", USER, [])
    gone = remove_user(path, "alice")
    assert gone.name == "alice"
    assert [u.name for u in list_users(path)] == ["bob"]
    assert Identities("d", load_users(path)).identify(bob).name == "bob"
    with pytest.raises(UsersError, match="no user 'alice'"):
        remove_user(path, "alice")
    with pytest.raises(UsersError, match="no such file"):
        remove_user(tmp_path / "nope.yaml", "bob")


def test_render_reads_back():
    users = (UserEntry("alice", USER, frozenset({"team-b", "team-a", ""}), H1, max_jobs=500),
             UserEntry("root", ADMIN, frozenset(), H2))
    assert parse_users(yaml.safe_load(render(users))) == users
    assert "max_jobs" not in render(users[1:])         # no cap: no key


# ----------------------------------------------------------------------------- fuzz

EDGES = st.sampled_from([None, 0, -1, 2**64, 1.5, float("nan"), "", "alice", "admin", "user",
                         "daemon", "team-a", H1, H1.upper(), "sha256:", "a\nb", "x\0y", True,
                         [], {}, ["team-a"], [None]])
VALUES = st.recursive(st.one_of(EDGES, st.text(max_size=8), st.integers()),
                      lambda inner: st.one_of(st.lists(inner, max_size=3),
                                              st.dictionaries(st.text(max_size=6), inner,
                                                              max_size=3)),
                      max_leaves=8)
ENTRY = st.dictionaries(st.sampled_from(["name", "role", "entities", "max_jobs",
                                         "token_sha256", "token", "nme"]), VALUES, max_size=5)
FILES = st.one_of(VALUES, st.fixed_dictionaries({"users": st.lists(ENTRY, max_size=4)}),
                  st.dictionaries(st.sampled_from(["users", "user"]), VALUES, max_size=2))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def _door(path: Path) -> None:
    try:
        users = load_users(path, ENTITIES)
    except UsersError as err:
        assert "\n" not in str(err) and str(err).startswith(f"{path}: ")
        return
    assert all(isinstance(u, UserEntry) for u in users)
    Identities("daemon", users)              # what passes the door builds identities


@FUZZ
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_users_errors(scratch, data):
    _door(_file(scratch, data))


@FUZZ
@given(st.text(alphabet=st.sampled_from(list("users:-[]{},'\"&*!#\n :abc12\t?|>%@`")),
               max_size=120))
def test_yaml_ish_text_raises_only_users_errors(scratch, text):
    _door(_file(scratch, text))


@FUZZ
@given(FILES)
def test_random_structures_raise_only_users_errors(scratch, data):
    try:
        text = yaml.safe_dump(data, allow_unicode=True)
    except yaml.YAMLError:
        return
    _door(_file(scratch, text))
