"""Errors users see. Each names the field or the device and says what to do."""

from __future__ import annotations


class DistplanError(Exception):
    """Base class of every error distplan raises on purpose."""

    exit_code = 1


class InputError(DistplanError, ValueError):
    """Bad input: the message starts with the JSON path of the field and says the fix.

    >>> raise InputError("graph.edges[12].dst", "unknown op 'foo'", "name an op listed in graph.ops")
    """

    exit_code = 2

    def __init__(self, path: str, problem: str, fix: str | None = None):
        self.path = path
        self.problem = problem
        self.fix = fix
        msg = f"{path}: {problem}" if path else problem
        if fix:
            msg += f" ({fix})"
        super().__init__(msg)


class InfeasibleError(DistplanError):
    """No plan exists (or none was found) under the constraints; says where and by how much."""

    exit_code = 3

    def __init__(self, message: str, details: dict[str, object] | None = None):
        self.details = details or {}
        super().__init__(message)


class NoSolutionError(DistplanError):
    """No plan was found, and nothing proves that none exists: a solver stopped (time
    limit, error) without a feasible solution, or a heuristic (m-ETF, m-TOPO, m-SCT, a
    packing) could not place every op; ``details`` says where, when known."""

    exit_code = 4

    def __init__(self, message: str, details: dict[str, object] | None = None):
        self.details = details or {}
        super().__init__(message)


class PlanCheckError(DistplanError):
    """A formulation returned a plan that the independent evaluator rejects: a bug, never a result."""

    exit_code = 1


class InternalError(DistplanError):
    """An unexpected failure inside distplan (a bug): the original exception is its cause."""

    exit_code = 1
