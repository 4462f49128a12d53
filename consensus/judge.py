"""`judge`: an LLM picks among the proposals, blind to who wrote them.

Consensus does no I/O, so the method is split around the call the pipeline makes:
`build_judge_messages` → (the pipeline calls the judge model) → `parse_judge_reply` → `judge_result`.
Equivalent proposals are shown once (one candidate per canonical form), in a seeded shuffle of a
base order sorted by canonical form, so the same seed and proposals give the same prompt whatever
order the teachers answered in. Candidates show only content and tool calls: no teacher names and
no tool-call ids. With a single candidate the pipeline may skip the call: `judge_result(p, order[0])`.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from functools import lru_cache
from importlib.resources import files
from typing import Any

import jinja2

from consensus.result import (
    ConsensusResult,
    abstain,
    ballot,
    exact_groups,
    make_group,
    representative,
    share,
)
from ingestion.schema import Action, Proposal


@lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    text = files("configs").joinpath("judge_prompt.j2").read_text(encoding="utf-8")
    env = jinja2.Environment(autoescape=False, trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined)
    return env.from_string(text)


def _render_block(name: str, **context: Any) -> str:
    template = _template()
    return "".join(template.blocks[name](template.new_context(context))).strip()


def _text(content: Any) -> str:
    if isinstance(content, list):  # content blocks: keep the text, mark the rest
        return "\n".join(b.get("text", "") if b.get("type") == "text" else f"[{b.get('type')}]"
                         for b in content if isinstance(b, dict))
    return "" if content is None else str(content)


def _call_text(name: str, arguments: Any) -> str:
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    return f"[tool call] {name} {arguments}"


def render_message(message: dict[str, Any]) -> str:
    """One conversation message as judge-readable text; tool-call ids left out.

    >>> render_message({"role": "assistant", "content": "Looking.", "tool_calls": [{"id": "toolu_1",
    ...     "type": "function", "function": {"name": "Read", "arguments": {"file_path": "a.py"}}}]})
    'Looking.\\n[tool call] Read {"file_path": "a.py"}'
    """
    parts = [_text(message.get("content"))]
    for call in message.get("tool_calls") or []:
        function = call.get("function", call)
        parts.append(_call_text(function.get("name", ""), function.get("arguments", {})))
    return "\n".join(part for part in parts if part)


def render_action(action: Action) -> str:
    """A candidate action as text: what it says and the calls it makes, nothing about its author.

    >>> render_action(Action(content="", tool_calls=[]))
    '(no text, no tool call)'
    """
    return render_message(action.to_message()) or "(no text, no tool call)"


def build_judge_messages(state_messages: Sequence[dict[str, Any]], proposals: Sequence[Proposal],
                         seed: int | str, cwd: str | None = None) -> tuple[list[dict[str, str]], list[int]]:
    """Judge chat messages and `order`: order[k] is the proposal index shown as candidate k + 1.

    >>> p = lambda t, text: Proposal(state_id="s", teacher=t, model=t, action=Action(content=text))
    >>> messages, order = build_judge_messages([{"role": "user", "content": "hi"}],
    ...     [p("gpt-5", "Hello"), p("deepseek", "hello"), p("qwen", "Hi there")], seed="s")
    >>> sorted(order), "gpt-5" in messages[1]["content"]
    ([1, 2], False)
    """
    b = ballot(proposals, cwd)
    order = [representative(proposals, members) for _, _, members in
             sorted(exact_groups(b), key=lambda g: g[0])]
    random.Random(seed).shuffle(order)
    transcript = [{"role": m.get("role", "user"), "text": render_message(m)} for m in state_messages]
    candidates = [{"number": k + 1, "text": render_action(proposals[i].action)}  # type: ignore[arg-type]
                  for k, i in enumerate(order)]
    messages = [{"role": "system", "content": _render_block("system")},
                {"role": "user", "content": _render_block("user", transcript=transcript,
                                                          candidates=candidates)}]
    return messages, order


_ANSWER = re.compile(r"answer\s*[:=]?\s*[*#\[(]*\s*(?:candidate\s*)?#?\s*(\d+)", re.IGNORECASE)


def parse_judge_reply(text: str | None, order: Sequence[int]) -> int | None:
    """The proposal index the judge chose (its last `ANSWER: n`), or None if unreadable or out of range.

    >>> parse_judge_reply("Candidate 1 is risky.\\nANSWER: 2", [4, 0, 7])
    0
    >>> parse_judge_reply("**Answer:** Candidate 3", [4, 0, 7]), parse_judge_reply("ANSWER: 9", [4, 0])
    (7, None)
    """
    if not text:
        return None
    found = _ANSWER.findall(text)
    if found:
        number = int(found[-1])
    elif text.strip().isdigit():
        number = int(text.strip())
    else:
        return None
    return order[number - 1] if 1 <= number <= len(order) else None


def judge_result(proposals: Sequence[Proposal], index: int | None, cwd: str | None = None) -> ConsensusResult:
    """The judge's pick as a result; agreement is the share of teachers equivalent to it (informative).

    >>> p = lambda t, text: Proposal(state_id="s", teacher=t, model=t, action=Action(content=text))
    >>> r = judge_result([p("a", "x"), p("b", "y"), p("c", "Y")], 1)
    >>> r.reached, r.winner_teachers, round(r.agreement, 3)
    (True, ['b', 'c'], 0.667)
    """
    b = ballot(proposals, cwd)
    ranked = exact_groups(b)
    groups = [make_group(proposals, form, weight, members) for form, weight, members in ranked]
    won = next((k for k, (_, _, members) in enumerate(ranked) if index in members), None)
    if index is None or won is None:
        return abstain("judge", "judge_no_choice", b.voters, groups)
    groups.insert(0, groups.pop(won))
    form, weight, _ = ranked[won]
    return ConsensusResult(method="judge", reached=True, action=proposals[index].action, canonical=form,
                           agreement=float(share(weight, len(b.voters))), teachers=b.voters,
                           winner_teachers=groups[0].teachers, groups=groups, match="exact")
