"""``policies.frozen.record``: a frozen dataclass with a quicker ``__init__`` behaves as
``dataclass(frozen=True)`` does: the same parameters, defaults, factories and checks."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import field

import pytest

from policies.frozen import record


def _pair():
    """The same class, as a record and as a plain frozen dataclass."""

    class Thing:
        a: int
        b: str = "b"
        c: list = field(default_factory=list)

        def __post_init__(self) -> None:
            if self.a < 0:
                raise ValueError("a must be >= 0")
            object.__setattr__(self, "b", self.b.upper())

    plain = dataclasses.dataclass(frozen=True)(type("Thing", (), dict(Thing.__dict__)))
    return record(Thing), plain


def test_a_record_takes_what_the_dataclass_takes():
    fast, plain = _pair()
    assert str(inspect.signature(fast)) == str(inspect.signature(plain))
    for args, kwargs in [((1,), {}), ((1, "x"), {}), ((), {"a": 2, "c": [3]}),
                         ((1,), {"b": "y"})]:
        x, y = fast(*args, **kwargs), plain(*args, **kwargs)
        assert dataclasses.asdict(x) == dataclasses.asdict(y)
        assert repr(x).split("(", 1)[1] == repr(y).split("(", 1)[1]
    assert fast(1).c is not fast(1).c              # a fresh default from the factory
    assert fast(1, "b", [1]) == fast(1, "b", [1]) and fast(1) != fast(2)
    assert dataclasses.replace(fast(1, "x"), a=5) == fast(5, "X")


def test_a_record_refuses_what_the_dataclass_refuses():
    fast, plain = _pair()
    for make in (fast, plain):
        with pytest.raises(ValueError, match="a must be"):
            make(-1)                                 # __post_init__ runs
        with pytest.raises(TypeError):
            make()                                   # a field without a default
        with pytest.raises(TypeError):
            make(1, "b", [], 4)                      # too many
        with pytest.raises(dataclasses.FrozenInstanceError):
            make(1).a = 2
        with pytest.raises(dataclasses.FrozenInstanceError):
            del make(1).a


def test_a_class_with_its_own_init_or_keyword_fields_keeps_it():
    @record
    class Own:
        a: int

        def __init__(self, text: str) -> None:
            object.__setattr__(self, "a", int(text))

    assert Own("3").a == 3

    @record
    class Keyword:
        a: int = field(kw_only=True)

    assert Keyword(a=1).a == 1
    with pytest.raises(TypeError):
        Keyword(1)
