"""Everything a run is configured by, gathered from the flags in one validated object."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from ingestion.options import IngestOptions
from ingestion.schema import StrictModel


class PoolOptions(StrictModel):
    teachers: str
    cache: Path | None = None
    concurrency: int = 16
    per_teacher: int = 8
    samples: int = 1
    timeout: float = 120.0
    max_cost: float | None = None
    allow_same_family: bool = False
    redact: bool = True               # teachers' answers too (states: RunConfig.redact)
    max_response_bytes: int = 10_000_000
    batch: bool = False          # through the providers' batch APIs (teachers/batch.py), half price
    batch_poll: float = 30.0     # seconds between polls of submitted batches
    trace_parallel: int | None = None  # states of a trace in flight, in waves (replay.ask.waves); None: auto


class ConsensusOptions(StrictModel):
    method: str = "vote"
    min_agreement: float = 0.5
    match: Literal["exact", "intent"] = "intent"  # the loosest tier: intent = exact, then intent
    judge: str | None = None
    early_stop: bool = False


class ExportOptions(StrictModel):
    preflight_tokenizer: str | None = None
    max_length: int | None = None
    push_to_hub: str | None = None
    tokenizer: str | None = None                                # counts tokens (None: the estimate)
    preflight_templates: list[str] = Field(default_factory=list)  # flag rows per template, never drop
    test_split: float | None = None                             # share of rows in `test`, by trace
    license: str | None = None                                  # the card's license (Hub identifier)
    format: Literal["dpo", "kto", "sft"] = "dpo"                # the trainer's (replay/export/formats.py)
    swap_pairs: bool = False                                    # a control: chosen and rejected exchanged


class RunConfig(StrictModel):
    source: Path | list[Path]        # one path (run.json as before) or several (--source a,b)
    out: Path
    dry_run: bool = False
    redact: bool = True               # one redaction pass per state, right after ingestion
    pseudonymise: bool = True         # personal data to placeholders in the same pass (issue #50)
    names: bool = True                # people's names in prose too, where spaCy's model is had (issue #58)
    force: bool = False          # write into a non-empty folder replay.run did not make (deletes nothing)
    max_failed: float = 0.1      # share of the states put to teachers that may fail before exit 1
    select: list[str] = Field(default_factory=list)   # --select filters (replay/select/filters.py)
    ingest: IngestOptions = IngestOptions()
    pool: PoolOptions | None = None
    consensus: ConsensusOptions = ConsensusOptions()
    export: ExportOptions = ExportOptions()
    command: str = ""
