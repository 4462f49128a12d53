"""The loop's stages: each is one of the project's commands run as a child process (its output in
`OUT/logs/round-K-STAGE.log`), and the figures `loop.json` keeps, read back from what the command wrote.

    round 0     resolve (collect.run --evaluate on the held-out instances) → heldout (replay.run on
                those rollouts: the states and consensus every round is judged at) → eval (replay.eval)
    round K ≥ 1 collect (collect.run on the training instances, round K-1's student) → pairs (replay.run)
                → verify (replay.verify, with --verify) → train (python -m replay.train) → resolve → eval
                (replay.eval: round 0 and round K side by side, with their paired differences)
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

from replay.loop.config import LoopConfig, LoopError
from replay.loop.students import Student

PY = sys.executable


def stage_names(round_: int, verify: bool) -> list[str]:
    """
    >>> stage_names(0, True), stage_names(2, False)
    (['resolve', 'heldout', 'eval'], ['collect', 'pairs', 'train', 'resolve', 'eval'])
    """
    if round_ == 0:
        return ["resolve", "heldout", "eval"]
    return ["collect", "pairs", *(["verify"] if verify else []), "train", "resolve", "eval"]


def round_dir(config: LoopConfig, round_: int) -> Path:
    return config.out / f"round-{round_}"


def run_command(argv: list[str], log: Path, what: str) -> None:
    """Run one stage's command to its end, its output in `log`; a failure is a LoopError naming the log.
    An interrupt of the loop is passed on as SIGTERM (every command here cleans up on it) and waited for."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as handle:
        handle.write(f"$ {subprocess.list2cmdline(argv)}\n".encode())
        handle.flush()
        child = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            code = child.wait()
        except KeyboardInterrupt:
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(timeout=120)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            raise
    if code != 0:
        raise LoopError(f"{what} failed (exit {code}): {_last_line(log)} (log: {log})")


def _last_line(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or lines or ["(no output)"])[-1].strip()[:300]


def _json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise LoopError(f"{path} was not written")
    return orjson.loads(path.read_bytes())


# --- collect and resolve -----------------------------------------------------------------------------

def collect_argv(config: LoopConfig, student: Student, url: str, instances: Path, out: Path, samples: int,
                 evaluate: bool, seed: int) -> list[str]:
    argv = [PY, "-m", "collect.run", "--instances", str(instances), "--student-url", url,
            "--student-model", student.name, "--out", str(out), "--samples", str(samples),
            "--max-turns", str(config.max_turns), "--seed", str(seed), "-q"]
    if evaluate:
        argv.append("--evaluate")
    if config.temperature is not None:
        argv += ["--temperature", str(config.temperature)]
    if config.max_tokens is not None:
        argv += ["--max-tokens", str(config.max_tokens)]
    return argv + config.extra("collect")


def rollout_figures(out: Path) -> dict[str, Any]:
    """collect.run's report.json as loop.json keeps it: rollouts, turns, exit statuses, resolve rate
    (Wilson interval over rollouts) and the student's tokens (the rollouts' `usage`)."""
    from replay.train.wilson import wilson

    report = _json(out / "report.json")
    figures: dict[str, Any] = {key: report.get(key) for key in ("rollouts", "ok", "turns", "exit_status")}
    if report.get("evaluate"):
        evaluated, resolved = report.get("evaluated", 0), report.get("resolved", 0)
        figures["resolve"] = {"resolved": resolved, "evaluated": evaluated,
                              "rate": round(resolved / evaluated, 4) if evaluated else None,
                              "interval": wilson(resolved, evaluated)}
    figures["student_tokens"] = student_tokens(out)
    return figures


def student_tokens(out: Path) -> dict[str, int]:
    """Prompt and completion tokens of every student turn in the rollout files under `out`."""
    total = {"prompt": 0, "completion": 0}
    for path in sorted(out.rglob("*.rollout.jsonl")):
        with open(path, "rb") as handle:
            for line in handle:
                try:
                    usage = orjson.loads(line).get("usage") or {}
                except (orjson.JSONDecodeError, AttributeError):
                    continue
                total["prompt"] += int(usage.get("prompt_tokens") or 0)
                total["completion"] += int(usage.get("completion_tokens") or 0)
    return total


# --- pairs (replay.run) --------------------------------------------------------------------------------

def run_argv(config: LoopConfig, source: Path, out: Path, test_split: float | None) -> list[str]:
    argv = [PY, "-m", "replay.run", "--source", str(source), "--out", str(out), "--teachers", config.teachers,
            "--cache", str(config.cache), "--format", config.format, "--force"]
    if test_split:
        argv += ["--test-split", str(test_split)]
    if config.max_length is not None:
        argv += ["--max-length", str(config.max_length)]
    return argv + config.extra("run")


def pairs_figures(out: Path, cache: Path, since: float) -> dict[str, Any]:
    """replay.run's report.json, and what the stage paid: its report counts the calls of the attempt that
    finished (answers an earlier, killed attempt received come from the cache at no cost there), so the
    teachers' USD is read from the cache: the answers stored since the stage first started."""
    report = _json(out / "report.json")
    keys = ("states", "pairs", "cost_usd", "agree", "states_failed")
    return {key: report[key] for key in keys if key in report} | paid(cache, since)


def paid(cache: Path, since: float) -> dict[str, Any]:
    """Teacher calls answered and their USD, stored in the loop's cache since `since` (epoch seconds)."""
    import sqlite3

    if not cache.is_file():
        return {"teacher_calls": 0, "teacher_usd": 0.0}
    with sqlite3.connect(f"file:{cache}?mode=ro", uri=True) as db:
        calls, usd = db.execute("SELECT COUNT(*), COALESCE(SUM(cost_usd), 0) FROM responses "
                                "WHERE error IS NULL AND created >= ?", (since,)).fetchone()
    return {"teacher_calls": calls, "teacher_usd": round(usd, 6)}


# --- verify ------------------------------------------------------------------------------------------

def verify_argv(config: LoopConfig, url: str, pairs: Path, rollouts: Path) -> list[str]:
    return [PY, "-m", "replay.verify", "--run", str(pairs), "--rollouts", str(rollouts),
            "--instances", str(config.instances), "--student-url", url, "--max-turns", str(config.max_turns),
            "-q"]


def verify_figures(pairs: Path) -> dict[str, Any]:
    """replay.verify's summary, which it adds to the run's report.json under `verify`."""
    return {"verify": _json(pairs / "report.json").get("verify")}


# --- train -------------------------------------------------------------------------------------------

def train_argv(config: LoopConfig, round_: int, parent: Student, pairs: Path, out: Path) -> list[str]:
    """Round K trains round K-1's student: with LoRA, round K-1's adapter of round 0's model goes on
    training (`--adapter`); with --lora-r 0, round K-1's full folder."""
    model = config.student if config.lora_r > 0 else parent.folder
    argv = [PY, "-m", "replay.train", config.format, "--dataset", str(pairs), "--model", model,
            "--output", str(out), "--max-steps", str(config.max_steps), "--epochs", str(config.epochs),
            "--batch-size", str(config.batch_size), "--lora-r", str(config.lora_r),
            "--seed", str(config.seed)]
    if config.lora_r > 0 and parent.adapter is not None:
        argv += ["--adapter", parent.adapter]
    if config.learning_rate is not None:
        argv += ["--learning-rate", str(config.learning_rate)]
    if config.max_length is not None:
        argv += ["--max-length", str(config.max_length)]
    if config.cpu:
        argv.append("--cpu")
    return argv + config.extra("train")


def training_rows(pairs: Path) -> int | None:
    """The rows replay.run wrote for training (its `train` split, or all with no split); None: not said."""
    extra = _json(pairs / "report.json").get("extra") or {}
    splits = extra.get("splits")
    return splits.get("train", 0) if isinstance(splits, dict) else extra.get("dataset_rows")


def train_figures(out: Path) -> dict[str, Any]:
    """held_out.json's preference accuracies before and after (absent without a test split)."""
    path = out / "held_out.json"
    if not path.is_file():
        return {"held_out": None}
    report = _json(path)
    keep = ("pairs", "accuracy", "interval", "margin", "likelihood_accuracy", "likelihood_interval")
    return {"steps": report.get("steps"), "rows": report.get("rows"),
            "held_out": {when: {name: {k: figures.get(k) for k in keep}
                                for name, figures in report.get(when, {}).get("yardsticks", {}).items()}
                         for when in ("before", "after")}}


# --- eval --------------------------------------------------------------------------------------------

def eval_models(pairs: list[tuple[Student, str]]) -> str:
    """replay.eval's --models: `round-K=openai/<served name>@<url>#price=0/0` (the student costs no USD)."""
    return ",".join(f"round-{s.round}=openai/{s.name}@{url}#price=0/0" for s, url in pairs)


def eval_argv(config: LoopConfig, models: str) -> list[str]:
    """replay.eval at the held-out states; the students' replies capped as in the rollouts (--max-tokens)."""
    cap = ["--max-tokens", str(config.max_tokens)] if config.max_tokens is not None else []
    return [PY, "-m", "replay.eval", "--run", str(config.heldout_run), "--models", models, "--states", "all",
            "--seed", str(config.seed), *cap]


def keep_eval(config: LoopConfig, round_: int) -> Path:
    """replay.eval writes into the held-out run's eval/; each round keeps its own copy."""
    from replay.evaluation.outputs import EVAL_DIR

    target = round_dir(config, round_) / "eval"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(config.heldout_run / EVAL_DIR, target)
    return target


def eval_figures(folder: Path) -> dict[str, Any]:
    """Per model: consensus agreement, valid and tool-call rates with intervals; the paired differences."""
    report = _json(folder / "eval.json")
    wanted = ("consensus_exact", "consensus_intent", "valid", "tool_call")

    def rates(block: dict[str, Any]) -> dict[str, Any]:
        return {name: {k: block["rates"][name].get(k) for k in ("value", "low", "high", "n")}
                for name in wanted if name in block["rates"]}

    return {"models": {m["name"]: rates(m) | {"answered": m.get("answered"), "failed": m.get("failed")}
                       for m in report["models"]},
            "differences": {f"{d['second']} - {d['first']}": rates(d) for d in report["differences"]},
            "intervals_reliable": report.get("intervals_reliable")}
