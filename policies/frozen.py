"""Frozen records that are quick to make (docs/style.md §1: records are frozen).

``dataclass(frozen=True)`` writes each field through ``object.__setattr__``, one call per
field. A round makes some eight records of about seventy fields in all (the demand, the
plan, the batch, the round, the driver's steps), and those calls cost 4-5% of a
simulation (issue #30). ``record`` is that same frozen dataclass, with an ``__init__`` that
writes the new instance's ``__dict__`` instead: the same parameters, defaults and
factories, then ``__post_init__``. Everything else is the dataclass's own: equality,
``repr``, ``dataclasses.replace`` and ``fields``, and the refusal to set or delete a field.
"""

from __future__ import annotations

import dataclasses

__all__ = ["record"]


class _Factory:
    """The default of a field made by its factory (shown as the dataclass shows it)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def record(cls: type) -> type:
    """``@dataclass(frozen=True)`` with the quicker ``__init__``. A class whose fields the
    plain ``__init__`` below cannot take (keyword-only ones, fields left out of
    ``__init__``), or that writes its own ``__init__``, keeps its own or the dataclass's."""
    own_init = "__init__" in cls.__dict__
    cls = dataclasses.dataclass(frozen=True)(cls)
    fields = dataclasses.fields(cls)
    if own_init or any(f.kw_only or not f.init for f in fields):
        return cls
    env: dict[str, object] = {"_FACTORY": _FACTORY}
    params, lines = ["self"], ["    _own = self.__dict__"]
    for f in fields:
        name = f.name
        if f.default is not dataclasses.MISSING:
            env[f"_default_{name}"] = f.default
            params.append(f"{name}=_default_{name}")
            lines.append(f"    _own[{name!r}] = {name}")
        elif f.default_factory is not dataclasses.MISSING:
            env[f"_factory_{name}"] = f.default_factory
            params.append(f"{name}=_FACTORY")
            lines.append(f"    _own[{name!r}] = _factory_{name}() if {name} is _FACTORY "
                         f"else {name}")
        else:
            params.append(name)
            lines.append(f"    _own[{name!r}] = {name}")
    if hasattr(cls, "__post_init__"):
        lines.append("    self.__post_init__()")
    source = f"def __init__({', '.join(params)}):\n" + "\n".join(lines) + "\n"
    exec(source, env)   # (as dataclasses makes its own __init__)
    init = env["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__annotations__ = {**{f.name: f.type for f in fields}, "return": None}
    cls.__init__ = init
    return cls
