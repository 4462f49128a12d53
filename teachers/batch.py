"""`--batch`: the pool's calls through the providers' batch APIs, at half price, before the run asks.

OpenAI Batch goes through litellm's file and batch functions (`acreate_file`, `acreate_batch`,
`aretrieve_batch`, `afile_content`); Anthropic Message Batches are retrieved and read through them too,
but created with the `anthropic` SDK (litellm 1.106.2 raises NotImplementedError for creating them).
Each request's body is exactly what `litellm.acompletion` would send for the same call
(`litellm.utils.return_raw_request`), and its custom_id is the call's response-cache key, so the
answers land in the same cache as ordinary calls: the run that follows (and any re-run or ablation)
reads them from there. Submitted batch ids are committed to the cache file (`teachers.batch_store`)
the moment the provider returns them; a killed run resumes by polling them and never submits again.
Teachers of other providers (DeepSeek has no batch API) are asked the ordinary way, after the batches.
A request the batch did not answer (errored, or its batch failed or expired) is asked directly too.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ingestion.schema import TraceState
from teachers.batch_store import OPEN, Batch, BatchStore
from teachers.client import api_key_for, call_kwargs, retrying
from teachers.cost import Tokens, cost_of
from teachers.llm import load_litellm
from teachers.registry import TeacherSpec
from teachers.request import call_options
from teachers.spend import worst_case

PROVIDERS = ("openai", "anthropic")
_LIMITS = {"openai": 50_000, "anthropic": 10_000}  # requests per batch (the APIs allow 50k / 100k)
_MAX_BYTES = 95_000_000  # OpenAI takes input files up to 200 MB, Anthropic batches up to 256 MB
_ENDED = {"failed", "expired", "cancelled"}
SUBMISSION = "teacher_replay_submission"  # OpenAI batch metadata: which requests a batch holds


def batch_provider(teacher: TeacherSpec) -> str | None:
    """'openai' or 'anthropic' when the teacher's calls can go through a batch API, else None.

    >>> batch_provider(TeacherSpec(name="a", model="gpt-5")), batch_provider(TeacherSpec(name="d",
    ...     model="deepseek/deepseek-chat"))
    ('openai', None)
    """
    try:
        provider = load_litellm().get_llm_provider(teacher.model)[1]
    except Exception:  # not a litellm model string
        return None
    return provider if provider in PROVIDERS else None


def request_body(teacher: TeacherSpec, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                 options: dict[str, Any]) -> dict[str, Any]:
    """The body `litellm.acompletion` would send for this call (model, messages, mapped params)."""
    from litellm.types.utils import CallTypes
    from litellm.utils import return_raw_request

    kwargs = call_kwargs(teacher, tools, options)
    kwargs.pop("api_key", None)  # return_raw_request signs with a placeholder: the key stays here
    raw = return_raw_request(CallTypes.completion, {"model": teacher.model, "messages": messages, **kwargs})
    if not raw.get("raw_request_body"):
        raise ValueError(f"litellm could not build {teacher.name}'s request: {raw.get('error')}")
    return raw["raw_request_body"]


@dataclass
class _Chunk:
    teacher: TeacherSpec
    provider: str
    lines: list[Any] = field(default_factory=list)
    keys: list[tuple[str, int]] = field(default_factory=list)
    held: list[float] = field(default_factory=list)
    size: int = 0


@dataclass
class BatchRun:
    """What `--batch` did, for report.json (`extra.batch`)."""

    submitted: int = 0     # batches created by this run
    resumed: int = 0       # batches a killed run had submitted, polled by this one
    requests: int = 0      # requests this run put in batches
    answered: int = 0      # answers collected into the response cache
    unanswered: int = 0    # requests a batch did not answer: asked directly afterwards
    over_budget: int = 0   # requests --max-cost left out of the batches
    direct: list[str] = field(default_factory=list)  # teachers without a batch API, asked directly


def _endpoint(teacher: TeacherSpec, provider: str) -> dict[str, Any]:
    # The OpenAI client under litellm retries on its own (twice) unless told not to: a create retried
    # there, unseen, would submit a batch twice. Our one policy retries, and adopts first.
    out: dict[str, Any] = {"custom_llm_provider": provider, "max_retries": 0}
    if teacher.api_base:
        out["api_base"] = teacher.api_base
    if (key := api_key_for(teacher)) is not None:
        out["api_key"] = key
    return out


class Batcher:
    """Plans, submits, polls and collects the batches of one run. `pool` is the run's `TeacherPool`."""

    def __init__(self, pool: Any, store: BatchStore, poll: float = 30.0,
                 note: Callable[[str], None] = lambda text: None) -> None:
        self.pool, self.store, self.poll, self.note = pool, store, poll, note
        self.run = BatchRun()
        self._held: dict[str, float] = {}

    async def prefetch(self, states: Iterable[TraceState]) -> BatchRun:
        """Every batchable call of these states answered into the response cache (or left to ask)."""
        batchable = {t.name: p for t in self.pool.teachers if (p := batch_provider(t))}
        self.run.direct = sorted(t.name for t in self.pool.teachers if t.name not in batchable)
        waiting = self.store.open_keys()
        resumed: set[str] = set()
        chunks: dict[str, _Chunk] = {}
        for state in states:
            for teacher in self.pool.split(state)[0]:
                if teacher.name not in batchable:
                    continue
                for sample in range(self.pool.samples):
                    key = self.pool.key(teacher, state, sample)
                    if key in waiting:
                        resumed.add(waiting[key])
                        continue
                    if self.pool.cache.get(key) is not None:
                        continue
                    chunk = chunks.setdefault(teacher.name, _Chunk(teacher, batchable[teacher.name]))
                    self._add(chunk, state, key, sample)
                    if len(chunk.keys) >= _LIMITS[chunk.provider] or chunk.size >= _MAX_BYTES:
                        await self._submit(chunks.pop(teacher.name))
            await asyncio.sleep(0)
        for chunk in chunks.values():
            await self._submit(chunk)
        self.run.resumed = len(resumed)
        await self._collect_all()
        return self.run

    def _add(self, chunk: _Chunk, state: TraceState, key: str, sample: int) -> None:
        messages, tools = self.pool.request(state)
        teacher = chunk.teacher
        if self.pool.spend.cap is not None:  # hold the worst case until the batch is collected
            prompt = sum(self.pool.prefix_tokens(teacher, messages, tools))
            expected = cost_of(teacher, Tokens(prompt, self.pool.expected_completion_tokens), batch=True)
            if self.pool.spend.fits(expected) is not True:
                self.run.over_budget += 1
                return
            self._held[key] = self.pool.spend.admit(expected, worst_case(teacher, prompt, batch=True))
        body = request_body(teacher, messages, tools, call_options(teacher.model, teacher.api_base,
                                                                   state.trace_id))
        if chunk.provider == "openai":
            line = json.dumps({"custom_id": key, "method": "POST", "url": "/v1/chat/completions",
                               "body": body}, ensure_ascii=False).encode() + b"\n"
            chunk.size += len(line)
            chunk.lines.append(line)
        else:
            chunk.lines.append({"custom_id": key, "params": body})
            chunk.size += len(json.dumps(body))
        chunk.keys.append((key, sample))

    async def _call(self, make: Callable[[], Awaitable[Any]]) -> Any:
        async def attempt() -> Any:  # tenacity awaits only what an async function returns
            return await make()

        return await retrying(self.pool.retry)(attempt)

    async def _submit(self, chunk: _Chunk) -> None:
        if not chunk.keys:
            return
        teacher = chunk.teacher
        endpoint = _endpoint(teacher, chunk.provider)
        if chunk.provider == "openai":
            created = await self._submit_openai(chunk, endpoint)
        else:
            import anthropic

            client = anthropic.AsyncAnthropic(api_key=endpoint.get("api_key"), base_url=teacher.api_base,
                                              max_retries=0)
            created = await self._call(lambda: client.messages.batches.create(requests=chunk.lines))
        self.store.record(Batch(created.id, chunk.provider, teacher.model, teacher.api_base or "",
                                teacher.name, OPEN, len(chunk.keys)), chunk.keys)
        self.run.submitted += 1
        self.run.requests += len(chunk.keys)
        self.note(f"batch {created.id}: {len(chunk.keys)} requests to {teacher.name} submitted")

    async def _submit_openai(self, chunk: _Chunk, endpoint: dict[str, Any]) -> Any:
        litellm, teacher = load_litellm(), chunk.teacher
        keys = "\n".join(key for key, _ in chunk.keys)
        submission = hashlib.sha256(f"{teacher.name}\n{keys}".encode()).hexdigest()[:32]
        if (found := await self._adopt(endpoint, submission)) is not None:
            return found
        data = b"".join(chunk.lines)
        uploaded = await self._call(lambda: litellm.acreate_file(
            file=("teacher-replay-batch.jsonl", data), purpose="batch", **endpoint))

        async def create() -> Any:  # each attempt first looks for what a lost attempt created
            return await self._adopt(endpoint, submission) or await litellm.acreate_batch(
                completion_window="24h", endpoint="/v1/chat/completions", input_file_id=uploaded.id,
                metadata={"created_by": "teacher-replay", "teacher": teacher.name, SUBMISSION: submission},
                **endpoint)

        return await self._call(create)

    async def _adopt(self, endpoint: dict[str, Any], submission: str) -> Any | None:
        """The batch an earlier attempt created for this very submission, still alive; else None."""
        try:
            listed = await load_litellm().alist_batches(limit=100, **endpoint)
        except Exception:  # a server that cannot list batches has nothing to adopt
            return None
        for batch in getattr(listed, "data", None) or []:
            if (getattr(batch, "metadata", None) or {}).get(SUBMISSION) == submission \
                    and batch.status not in _ENDED:
                self.note(f"batch {batch.id}: adopted (created by an attempt whose answer was lost)")
                return batch
        return None

    def _teacher(self, batch: Batch) -> TeacherSpec | None:
        for teacher in self.pool.teachers:
            if teacher.model == batch.model and (teacher.api_base or "") == batch.api_base:
                return teacher
        return None

    async def _collect_all(self) -> None:
        pending = [b for b in self.store.open_batches() if self._teacher(b) is not None]
        while pending:
            for batch in list(pending):
                if await self._collect(batch, self._teacher(batch)):  # type: ignore[arg-type]
                    pending.remove(batch)
            if pending:
                await asyncio.sleep(self.poll)

    async def _collect(self, batch: Batch, teacher: TeacherSpec) -> bool:
        """Poll one batch; when it has ended, put its answers in the cache. True once it is done."""
        litellm = load_litellm()
        endpoint = _endpoint(teacher, batch.provider)
        found = await self._call(lambda: litellm.aretrieve_batch(batch_id=batch.batch_id, **endpoint))
        if found.status in _ENDED:
            await self._settle(batch, set())
            self.store.mark(batch.batch_id, found.status)
            self.note(f"batch {batch.batch_id}: {found.status}; its requests will be asked directly")
            return True
        if found.status != "completed" or not found.output_file_id:
            return False
        content = await self._call(lambda: litellm.afile_content(file_id=found.output_file_id, **endpoint))
        answered = self._store_answers(batch, teacher, content.content)
        await self._settle(batch, answered)
        self.store.mark(batch.batch_id, "collected")
        self.note(f"batch {batch.batch_id}: {len(answered)} answers collected")
        return True

    def _store_answers(self, batch: Batch, teacher: TeacherSpec, content: bytes) -> set[str]:
        samples = self.store.requests(batch.batch_id)
        answered = set()
        for line in content.splitlines():
            row = json.loads(line) if line.strip() else {}
            key = row.get("custom_id")
            body = completion_of(batch.provider, row)
            if key in samples and body is not None:
                self.pool.store_batch_answer(teacher, key, samples[key], body)
                answered.add(key)
        self.run.answered += len(answered)
        self.run.unanswered += len(samples) - len(answered)
        return answered

    async def _settle(self, batch: Batch, answered: set[str]) -> None:
        """Book what the batch cost against --max-cost (a resumed batch's answers too: paid now)."""
        for key in self.store.requests(batch.batch_id):
            entry = self.pool.cache.get(key) if key in answered else None
            paid = entry.cost_usd if entry else 0.0
            if key in self._held:
                await self.pool.spend.settle(self._held.pop(key), paid)
            else:
                self.pool.spend.spent += paid


def completion_of(provider: str, row: dict[str, Any]) -> dict[str, Any] | None:
    """One output line as the chat.completion dict `complete()` returns; None when it holds no answer."""
    litellm = load_litellm()
    if provider == "anthropic":
        result = row.get("result") or {}
        if result.get("type") != "succeeded":
            return None
        import httpx
        from litellm.llms.anthropic.chat.transformation import AnthropicConfig

        message = result["message"]
        response = AnthropicConfig().transform_parsed_response(
            completion_response=message, raw_response=httpx.Response(200, json=message),
            model_response=litellm.ModelResponse())
    else:
        answer = row.get("response") or {}
        if row.get("error") or answer.get("status_code") != 200 or not answer.get("body"):
            return None
        from litellm.litellm_core_utils.llm_response_utils.convert_dict_to_response import (
            convert_to_model_response_object,
        )

        response = convert_to_model_response_object(response_object=answer["body"],
                                                     model_response_object=litellm.ModelResponse())
    return response.model_dump(mode="json", exclude_none=True)
