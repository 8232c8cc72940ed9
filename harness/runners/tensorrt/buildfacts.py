"""What a TensorRT build check found (:mod:`harness.runners.tensorrt.typed_build` finds it): pure data, nothing
imported beyond the standard library, so that the report and the case pipeline read a build's facts without loading
the build machinery, the engine inspector or the blame heuristics.
"""

from __future__ import annotations

from dataclasses import dataclass

OUTCOMES = ("ok", "parse", "build", "types", "crash")
NODE_ROWS = 300  # per-node type rows kept in a result (the report shows them); larger models keep the changes


@dataclass(frozen=True)
class BuildCulprit:
    """The ONNX node a builder error names."""

    node: str
    op: str
    dtype: str  # the precision of the node's first typed input ("" when unknown)
    evidence: str  # how it was found, e.g. "layer 'up' is named in the builder's error"


@dataclass(frozen=True)
class ParseFailure:
    """A node TensorRT's ONNX parser refused."""

    node: str
    op: str
    dtype: str  # the precision of the node's first typed input, e.g. "bf16" ("" when unknown)
    message: str  # TensorRT's description, e.g. "Assertion failed: ... The current type = BF16."


@dataclass(frozen=True)
class NodeTypes:
    """One ONNX node: the types the ONNX model declares for its outputs next to the ones TensorRT gave them."""

    node: str
    op: str
    onnx: str  # "fp16", or "fp16,int64" for several outputs ("?" where the model declares none)
    tensorrt: str  # the same for TensorRT's tensors; "" when the parser made no tensor (e.g. a Constant)


@dataclass(frozen=True)
class TrtBuild:
    """The build check of one converted model (see :mod:`harness.runners.tensorrt.typed_build`)."""

    backend: str  # "TensorRT-RTX 1.7.1.116" or "TensorRT 10.13.0.35"
    outcome: str  # one of OUTCOMES
    seconds: float = 0.0  # parse + build in the builder process
    plan_bytes: int | None = None
    parse_failures: tuple[ParseFailure, ...] = ()
    build_error: str = ""  # the builder's error lines, or the crashed process's last words
    type_changes: tuple[NodeTypes, ...] = ()
    checked: int = 0  # node outputs whose types were compared
    unmapped: tuple[str, ...] = ()  # nodes (other than Constant) with no TensorRT tensor
    nodes: tuple[NodeTypes, ...] = ()  # every node's types, for models of up to NODE_ROWS nodes
    nodes_total: int = 0
    build_culprits: tuple[BuildCulprit, ...] = ()  # outcome "build": the ONNX nodes the builder's error names

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"TrtBuild.outcome must be one of {OUTCOMES}, got {self.outcome!r}")

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"

    @property
    def builds(self) -> bool:
        """A plan was built (it may still have changed types)."""
        return self.outcome in ("ok", "types")

    def summary(self) -> str:
        """One line: ``builds in TensorRT-RTX 1.7.1.116: ok, plan 0.4 MB, 0.07 s`` / ``does not build ...``."""
        if self.outcome == "ok":
            return f"builds in {self.backend}: ok, plan {_mb(self.plan_bytes)}, {self.seconds:.2f} s"
        if self.outcome == "types":
            changes = "; ".join(
                f"{c.node} ({c.op}): ONNX {c.onnx}, TensorRT {c.tensorrt}" for c in self.type_changes[:3]
            )
            more = f" and {len(self.type_changes) - 3} more" if len(self.type_changes) > 3 else ""
            return f"{self.backend} changed types: {changes}{more}"
        if self.outcome == "parse" and self.parse_failures:
            first = self.parse_failures[0]
            more = f" (and {len(self.parse_failures) - 1} more node(s))" if len(self.parse_failures) > 1 else ""
            dtype = f" ({first.dtype})" if first.dtype else ""
            return (
                f"does not build in {self.backend}: {first.op or '?'}{dtype} at node {first.node or '?'}: "
                f"{first.message}{more}"
            )
        if self.outcome == "build" and self.build_culprits:
            culprit = self.build_culprits[0]
            dtype = f", {culprit.dtype}" if culprit.dtype else ""
            return (
                f"does not build in {self.backend}: the builder failed at node {culprit.node} ({culprit.op}"
                f"{dtype}; {culprit.evidence}): {self.build_error}"
            )
        if self.outcome == "crash":
            return f"does not build in {self.backend}: the builder process crashed: {self.build_error}"
        return f"does not build in {self.backend}: {self.build_error or 'the ONNX parser failed (no message)'}"


def _mb(size: int | None) -> str:
    return "?" if size is None else f"{size / 1e6:.1f} MB"
