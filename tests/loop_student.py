"""A tiny student that calls tools, for the loop's tests: tests/tiny_model.py's 2-layer Llama taught (plain
torch, a few seconds) to answer every prompt with one Hermes-style call, `bash` running `ls`, and saved
with transformers' response template so `transformers serve` returns that call as `tool_calls`.

Random weights answer in noise, and a rollout of noise ends at its first turn; this one walks a rollout
turn by turn (`ls` each time) and gives the teachers something to prefer against (`cat calc.py`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.tiny_model import build_tiny

CALL = {"name": "bash", "arguments": {"command": "ls"}}
PREFERRED = {"name": "bash", "arguments": {"command": "cat calc.py"}}


def _spec() -> Any:
    from collect.config import load_agent_spec

    return load_agent_spec()


TOOLS = _spec().tools


def _prompts() -> list[list[dict[str, Any]]]:
    """The mini agent's own prompts (collect/config.py AgentSpec): its start-up probe, the first messages
    of a rollout, and a rollout one call later."""
    from tests.collect_toy import toy_instance

    spec = _spec()
    out = [[{"role": "user", "content": spec.probe_prompt}]]
    earlier = {"id": "c0", "type": "function",
               "function": {"name": "bash", "arguments": json.dumps(CALL["arguments"])}}
    for problem in (toy_instance("toy__calc-1", "none")["problem_statement"], "Make the tests pass"):
        base = spec.first_messages(problem)
        out += [base, [*base, {"role": "assistant", "content": "", "tool_calls": [earlier]},
                       {"role": "tool", "tool_call_id": "c0", "content": "calc.py\ntests"}]]
    return out


def build_calling_student(out_dir: str | Path, steps: int = 60, seed: int = 0) -> Path:
    """The tiny model taught to answer `<tool_call>{CALL}</tool_call>`, with the response template."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from examples.make_smollm2 import response_template

    # A tokenizer trained on the agent's own texts, merging across spaces: the call is a few tokens and a
    # prompt a few hundred, so a few dozen steps teach the call.
    spec = _spec()
    calls = [f'<tool_call>{{"name": "bash", "arguments": {json.dumps(c["arguments"])}}}</tool_call>'
             for c in (CALL, PREFERRED)]
    corpus = [*calls * 20, spec.system_prompt, spec.probe_prompt, spec.instance_prompt, json.dumps(TOOLS)]
    path = build_tiny(out_dir, corpus, vocab_size=1024, across_words=True)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    torch.manual_seed(seed)
    answer = {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": CALL}]}
    batches = []
    for prompt in _prompts():
        head = tokenizer.apply_chat_template(prompt, tools=TOOLS, add_generation_prompt=True, tokenize=False)
        whole = tokenizer.apply_chat_template([*prompt, answer], tools=TOOLS, tokenize=False)
        head_ids = tokenizer(head, add_special_tokens=False)["input_ids"]
        ids = tokenizer(whole.rstrip("\n"), add_special_tokens=False)["input_ids"]
        labels = [-100] * len(head_ids) + ids[len(head_ids):]
        batches.append((torch.tensor([ids]), torch.tensor([labels])))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for step in range(steps):
        ids, labels = batches[step % len(batches)]
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.save_pretrained(path)
    tokenizer.response_template = response_template()
    tokenizer.save_pretrained(path)
    return path
