"""Hypothesis strategies for the wire's messages (``gavelsched.proto``), built from their
descriptors so that a field added to the protocol is fuzzed without a change here:

- ``messages(descriptor)``: any message, each field absent or drawn from its type's edges
  (0, -1, the type's limits, 2^53 and 2^53 + 1, NaN, infinities, subnormals, empty text,
  NUL, control characters, long text, unknown enum numbers), nested messages two deep;
- ``mutated(base)``: a message that passes the door, with one to three of its fields
  replaced so: the values that reach past the first check.

``words`` are strings worth trying (real job ids, job types); ``fields`` overrides a
field's strategy by name (e.g. a shell command kept harmless)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import strategies as st

F = FieldDescriptor
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)
ODD_WORDS = ("", "\0", "a\nb", "\x7f", "..", "../x", "x" * 5000, "\u00b2", "NaN", "-1")
FLOATS = st.one_of(st.floats(), st.sampled_from(
    [0.0, -0.0, -1.0, 0.5, 1.0, 5e-324, 1e9, 2.0 ** 53, 1e308, -1e308]))


def _integers(low: int, high: int) -> st.SearchStrategy[int]:
    edges = [v for v in (low, high, -1, 0, 1, 2, 2 ** 31 - 1, 2 ** 53, 2 ** 53 + 1)
             if low <= v <= high]
    return st.one_of(st.integers(low, high), st.integers(max(low, -3), 50),
                     st.sampled_from(edges))


INTEGERS = {
    F.TYPE_INT32: (-2 ** 31, 2 ** 31 - 1), F.TYPE_SINT32: (-2 ** 31, 2 ** 31 - 1),
    F.TYPE_SFIXED32: (-2 ** 31, 2 ** 31 - 1), F.TYPE_UINT32: (0, 2 ** 32 - 1),
    F.TYPE_FIXED32: (0, 2 ** 32 - 1), F.TYPE_INT64: (-2 ** 63, 2 ** 63 - 1),
    F.TYPE_SINT64: (-2 ** 63, 2 ** 63 - 1), F.TYPE_SFIXED64: (-2 ** 63, 2 ** 63 - 1),
    F.TYPE_UINT64: (0, 2 ** 64 - 1), F.TYPE_FIXED64: (0, 2 ** 64 - 1),
}


def values(field: FieldDescriptor, words: Sequence[str] = ()) -> st.SearchStrategy:
    """One value of ``field``'s scalar type, edges first among equals."""
    kind = field.type
    if kind in INTEGERS:
        return _integers(*INTEGERS[kind])
    if kind in (F.TYPE_DOUBLE, F.TYPE_FLOAT):
        return FLOATS
    if kind == F.TYPE_BOOL:
        return st.booleans()
    if kind == F.TYPE_STRING:
        return st.one_of(TEXT, st.sampled_from(ODD_WORDS + tuple(words)))
    if kind == F.TYPE_BYTES:
        return st.binary(max_size=40)
    if kind == F.TYPE_ENUM:    # (proto3 enums are open: an unknown number arrives as is)
        return st.one_of(st.sampled_from([v.number for v in field.enum_type.values]),
                         st.integers(-3, 100))
    raise TypeError(f"no strategy for field {field.full_name} of type {kind}")


def _field(field: FieldDescriptor, words: Sequence[str], depth: int,
           fields: Mapping[str, st.SearchStrategy]) -> st.SearchStrategy:
    if field.name in fields:
        one = fields[field.name]
    elif field.type == F.TYPE_MESSAGE and field.message_type.GetOptions().map_entry:
        key, value = (field.message_type.fields_by_name[n] for n in ("key", "value"))
        return st.dictionaries(values(key, words), _field(value, words, depth, fields),
                               max_size=3)
    elif field.type == F.TYPE_MESSAGE:
        one = messages(field.message_type, words, depth - 1, fields)
    else:
        one = values(field, words)
    return st.lists(one, max_size=3) if field.is_repeated else one


def _set(message: Message, field: FieldDescriptor, value) -> None:
    """``message.field = value``; a value the library refuses (text that is not UTF-8)
    leaves the field as it was, since such a message cannot be sent at all."""
    target = getattr(message, field.name)
    try:
        if field.is_repeated and isinstance(value, dict):        # a map
            target.clear()
            for key, item in value.items():
                if isinstance(item, Message):
                    target[key].CopyFrom(item)
                else:
                    target[key] = item
        elif field.is_repeated:
            del target[:]
            target.extend(value)
        elif field.type == F.TYPE_MESSAGE:
            target.CopyFrom(value)
        else:
            setattr(message, field.name, value)
    except (ValueError, TypeError):
        pass


def messages(descriptor: Descriptor, words: Sequence[str] = (), depth: int = 2,
             fields: Mapping[str, st.SearchStrategy] | None = None) -> st.SearchStrategy[Message]:
    """Any message of ``descriptor``'s type."""
    fields = fields or {}
    present = {f.name: _field(f, words, depth, fields) for f in descriptor.fields
               if depth > 0 or f.type != F.TYPE_MESSAGE}

    def build(drawn: dict) -> Message:
        message = GetMessageClass(descriptor)()
        for name, value in drawn.items():
            _set(message, descriptor.fields_by_name[name], value)
        return message
    return st.fixed_dictionaries({}, optional=present).map(build)


def mutated(base: Message, words: Sequence[str] = (),
            fields: Mapping[str, st.SearchStrategy] | None = None) -> st.SearchStrategy[Message]:
    """``base`` with one to three of its fields drawn anew (``messages``' values)."""
    fields = fields or {}
    descriptor = base.DESCRIPTOR
    if not descriptor.fields:
        return st.just(base)
    chosen = st.lists(st.sampled_from(list(descriptor.fields)), min_size=1, max_size=3,
                      unique_by=lambda f: f.name)

    def build(draw_fields) -> st.SearchStrategy[Message]:
        drawn = st.tuples(*(_field(f, words, 2, fields) for f in draw_fields))

        def apply(new_values) -> Message:
            message = GetMessageClass(descriptor)()
            message.CopyFrom(base)
            for field, value in zip(draw_fields, new_values):
                _set(message, field, value)
            return message
        return drawn.map(apply)
    return chosen.flatmap(build)


def plausible(descriptor: Descriptor, known: Mapping[str, object]) -> Message:
    """A message of ``descriptor``'s type with each of its scalar fields named in ``known``
    set to that value (a list of it, for a repeated one): the base ``mutated`` starts
    from."""
    message = GetMessageClass(descriptor)()
    for name, value in known.items():
        field = descriptor.fields_by_name.get(name)
        if field is None or field.type == F.TYPE_MESSAGE:
            continue
        if field.is_repeated:
            getattr(message, name).append(value)
        else:
            setattr(message, name, value)
    return message
