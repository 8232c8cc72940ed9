"""What a conversion made (:class:`ConversionResult`), apart from the converter that makes it
(:mod:`harness.convert.pipeline`): the conversion cache rebuilds results without loading the converter."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import onnx


@dataclass(frozen=True)
class ConversionResult:
    model: onnx.ModelProto
    low_nodes: tuple[str, ...]
    high_nodes: tuple[tuple[str, str], ...]
    """(node, reason) for every node not in low precision, including the ones kept as they were."""
    lowp_flop_share: float
    """Share of the estimated FLOPs in low precision, through If/Loop/Scan bodies (an upper bound when
    ``lowp_share_bound`` is set)."""
    cast_count: int
    """Casts inserted by the converter (the user's own Casts are not counted)."""
    clamped: tuple[str, ...]
    base_dir: Path | None = None
    """Folder that ``model``'s external tensors are read from (a lazily loaded model; None: all in memory).
    Such a model may hold pending casts: write it with :func:`harness.data.onnxsave.save_model`."""
    lowp_share_bound: str | None = None
    """Why ``lowp_flop_share`` is only an upper bound (a Loop/Scan trip count known only at run time); None: not."""
    notes: tuple[str, ...] = ()
    """What the converter said about this conversion (another converter's choices, in words for the report)."""
    cast_held_share: float = 0.0
    """Share of the estimated FLOPs kept FP32 by the model's own Casts to FP32 (their readers, reason
    ``user cast``: see :func:`cast_held`); 0.0 with ``respect_fp32_casts`` off."""

    def cast_held(self) -> tuple[tuple[str, str], ...]:
        """(node, reason) of the nodes the model's own FP32 Casts keep FP32 (an exporter's ``x.to(float32)``)."""
        from harness.convert.folding import USER_CAST

        return tuple((n, r) for n, r in self.high_nodes if r.startswith(USER_CAST))

    def qdq_kept(self) -> tuple[str, ...]:
        """Nodes kept in their quantized/FP32 types as part of a DQ -> op -> Q pattern (a QDQ model)."""
        from harness.convert.qdq import QDQ

        return tuple(n for n, r in self.high_nodes if r.startswith(f"{QDQ}:"))
