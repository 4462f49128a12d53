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
TOOLS = [{"type": "function", "function": {
    "name": "bash", "description": "Run a bash command in the repository.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                   "required": ["command"]}}}]


def _prompts() -> list[list[dict[str, Any]]]:
    """Prompts shaped like the mini agent's (a system prompt, a task, maybe earlier calls and results)."""
    out = []
    for task in ("Fix the bug in calc.py", "The add function is wrong", "Make the tests pass", "hello",
                 "This is a connectivity check. Call the `bash` tool with the command `echo ready`"):
        base = [{"role": "system", "content": "You are a software engineer working in /testbed."},
                {"role": "user", "content": task}]
        out.append(base)
        earlier = {"id": "c0", "type": "function",
                   "function": {"name": "bash", "arguments": json.dumps(CALL["arguments"])}}
        out.append([*base, {"role": "assistant", "content": "", "tool_calls": [earlier]},
                    {"role": "tool", "tool_call_id": "c0", "content": "calc.py\ntests"}])
    return out


def build_calling_student(out_dir: str | Path, steps: int = 120, seed: int = 0) -> Path:
    """The tiny model taught to answer `<tool_call>{CALL}</tool_call>`, with the response template."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from examples.make_smollm2 import response_template

    path = build_tiny(out_dir)
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
