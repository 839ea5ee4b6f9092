"""The API's errors: each reads as one line, which the CLI prints after ``error:`` with
exit code 2 (docs/design.md, Safety rules: bad input names the bad value, no traceback)."""

from __future__ import annotations

__all__ = ["ClientError", "InputError", "NoRates", "one_line"]


class InputError(Exception):
    """Bad input at a door: a job file, a flag, a value out of range (one line naming it)."""


class ClientError(Exception):
    """A call the scheduler refused, or a scheduler that was not reached: one line
    (``api.rpc_error_line``). ``code`` is the gRPC status name ("" when the scheduler
    answered but said no), ``details`` the scheduler's own text."""

    def __init__(self, line: str, *, code: str = "", details: str = "") -> None:
        super().__init__(line)
        self.code, self.details = code, details


class NoRates(InputError):
    """A job whose type has no throughput on any worker type the cluster has (``predict``)."""


def one_line(err: BaseException) -> str:
    """An error's first line, or its type's name when it says nothing."""
    return str(err).splitlines()[0] if str(err) else type(err).__name__
