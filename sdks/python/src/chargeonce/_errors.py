"""Why a call failed. A payment whose outcome is unknown is never an error: it
is :class:`~chargeonce.Uncertain`."""
from __future__ import annotations

from typing import Optional

from ._models import Code, Problem


class ChargeonceError(Exception):
    """Every error this SDK raises."""

    attempts: int = 0


class ConfigError(ChargeonceError):
    pass


class ProblemError(ChargeonceError):
    """The server refused with a problem document (a 4xx, or a read's error)."""

    def __init__(self, problem: Problem, attempts: int = 1) -> None:
        code = problem.code if isinstance(problem.code, str) else problem.code.value
        super().__init__(f"{problem.status} {code}: {problem.detail}")
        self.problem = problem
        self.attempts = attempts

    @property
    def code(self) -> Code:
        return self.problem.code

    @property
    def status(self) -> int:
        return self.problem.status

    @property
    def request_id(self) -> Optional[str]:
        return self.problem.request_id

    @property
    def detail(self) -> str:
        return self.problem.detail


class KeyReused(ProblemError):
    """422 ``idempotency_key_reused``: the key was first used for another request.
    A client bug; nothing was executed. Never retried."""


class UnexpectedAnswer(ChargeonceError):
    """An answer that is neither the resource nor its problem document."""

    def __init__(self, status: int, body: str, attempts: int) -> None:
        super().__init__(f"unexpected answer {status}: {body}")
        self.status = status
        self.body = body
        self.attempts = attempts


class Unavailable(ChargeonceError):
    """A read got no answer within the retry budget."""

    def __init__(self, last: str, attempts: int) -> None:
        super().__init__(f"no answer within the retry budget after {attempts} attempts: {last}")
        self.last = last
        self.attempts = attempts
