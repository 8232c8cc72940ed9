"""The facts a diagnosis records (plain frozen dataclasses; :mod:`harness.report` stores and renders them).

Nothing here computes anything: :mod:`harness.diagnose.profile` measures the per-tensor errors,
:mod:`harness.diagnose.cause` picks the cause, :mod:`harness.diagnose.verify` runs the fix and
:mod:`harness.diagnose.command` writes the commands.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_BUDGET = 8
"""Conversions a diagnosis may run to verify its fix (the region, then tune's search)."""


@dataclass(frozen=True)
class TensorAt:
    """A tensor of the FP32 graph, the node that makes it and that node's op; keyword-only (and last in every
    subclass), what an exact comparison counts and the output's name in the op schema."""

    tensor: str
    node: str
    op: str
    differing: int | None = field(default=None, kw_only=True)
    """An integer or bool tensor (TopK's indices, a mask), compared exactly: the positions whose value differs from
    FP32's (None: a float tensor)."""
    elements: int = field(default=0, kw_only=True)
    """Its elements over the golden's feeds (the denominator of `differing`)."""
    port: str = field(default="", kw_only=True)
    """The op schema's name for this output ("Indices" of TopK), "" when unknown."""


@dataclass(frozen=True)
class Divergence(TensorAt):
    """A tensor where the converted model leaves FP32 beyond tolerance: the diagnosed cause of a failing case."""

    max_abs: float
    max_rel: float

    @classmethod
    def at(cls, row: TensorAt, *, max_abs: float, max_rel: float) -> Divergence:
        """The divergence at the tensor ``row`` names, with its errors."""
        return cls(
            row.tensor,
            row.node,
            row.op,
            max_abs,
            max_rel,
            differing=row.differing,
            elements=row.elements,
            port=row.port,
        )


@dataclass(frozen=True)
class TensorError(TensorAt):
    """One tensor of the divergence profile, in the FP32 graph's topological order."""

    error: float
    """max |converted - fp32| / max |fp32| of this tensor over the golden's feeds (inf: non-finite where FP32 is)."""
    passed: bool
    """Within the tolerance the case's policy gives a tensor of this magnitude."""
    computed: bool
    """Depends on a graph input (False: a constant, an initializer expression or shape arithmetic)."""


@dataclass(frozen=True)
class Diagnosis:
    """Why a case fails and the fix castguard ran before printing it.

    ``cause`` is the earliest computed tensor beyond tolerance from which a path of tensors beyond tolerance
    reaches a failing output (None: no such path on ``emulate``; for instance only a tolerance override on an
    output failed, or the case's runner differs from the emulated one). ``fix_nodes`` were kept FP32 in a new
    conversion that ran on the case's runner against the same golden: ``verified`` says whether it passed,
    with ``fix_error`` (the worst output's scaled error) and ``fix_share`` (low-precision FLOP share, 0..1).
    ``evaluations`` counts the conversions run to find it (at most ``budget``).
    """

    cause: Divergence | None
    profile: tuple[TensorError, ...] = ()
    fix_nodes: tuple[str, ...] = ()
    fix_ops: tuple[str, ...] = ()
    """The fix as op types kept FP32 (``--op_types_to_exclude``): only when the cause's node has no name, which no
    node regex can select."""
    verified: bool = False
    fix_error: float | None = None
    fix_share: float | None = None
    evaluations: int = 0
    budget: int = 0
    command: str = ""
    """``castguard convert ...`` that writes the fixed model (the verified fix), runnable from any folder."""
    tune_command: str = ""
    """``castguard tune ...`` for this case's settings (printed when no fix was verified)."""
    low_nodes: int = 0
    """Nodes the failing case ran in low precision (0: there is nothing to keep FP32)."""
    problem: str = ""
    """Why a fix could not be converted or run (a conversion or runner error), when that happened."""
    converter: str = "castguard"
    """Whose conversion was diagnosed: for another converter only the search runs (``problem`` then says what it
    could not follow), no fix (:mod:`harness.diagnose.foreign`)."""
