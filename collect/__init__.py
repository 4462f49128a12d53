"""Live rollouts: a student served by vLLM drives an agent in a SWE-bench container; rollout traces out.

Owns: the command (`run`, `python -m collect.run`), one run over the instances (`runner`, or Ray tasks
in `on_ray` / `cluster`), a container through the docker SDK (`runtime`) with no answer key in it
(`answer_key`), the mini agent's loop and tools (`agent`, `tools`, `reply`), the student's servers
(`student`, token ids and logprobs), the claude-code agent and its recording proxy (`claude_code*`,
`proxy*`), rollout files (`records`, format in ROLLOUT_FORMAT.md), the harness's reward (`evaluate`), and
a rollout branched at a state for `replay.verify` (`branch`; many, here or on Ray: `branches`; a restored
state kept for its other branches: `snapshot`).
Must not: build DPO pairs or call a teacher; `ingestion/` reads what it writes.
Start at `run.main`, then `runner`.
"""
