"""What an ablation computed: one row per pool and the full pool's agreement matrix."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from replay.ablation.agreement import AgreementMatrix
from replay.ablation.evaluate import PoolCounts
from replay.ablation.quality import Quality
from replay.ablation.training import Training


class Ablation(BaseModel):
    """What `ablate` computed and wrote; rows[0] is the run's full pool."""

    run: Path
    out: Path
    method: str
    rows: list[PoolCounts]
    dirs: list[str]
    agreement: AgreementMatrix                     # at the exact tier
    agreement_intent: AgreementMatrix | None = None  # the same teachers at the intent tier
    calls: dict[str, int] = Field(default_factory=lambda: {"made": 0, "cached": 0, "failed": 0})
    missing: int = 0  # answers counted as no vote (--allow-missing)
    min_agreement: float = 0.5
    quality: Quality | None = None  # reliability, shares, frontier, asking orders (replay.ablation.quality)
    training: Training | None = None  # --train: each pool's trained student (replay.ablation.training)


