"""replay.loop's stages are the project's own commands: every command line the loop builds is read by that
command's own parser as the loop meant it, for each trainer format and with --verify. The docker test runs
one path (DPO, no verify) end to end; this keeps the others from drifting apart from their commands."""

from __future__ import annotations

from pathlib import Path

import pytest

from collect.run import parse_args as collect_args
from replay.eval import build_parser as eval_parser
from replay.loop import stages
from replay.loop.config import LoopConfig
from replay.loop.students import Student
from replay.run import build_parser as run_parser
from replay.train.cli import build_parser as train_parser
from replay.verify import build_parser as verify_parser

URL = "http://127.0.0.1:8000/v1"


def config(tmp_path: Path, **changes: object) -> LoopConfig:
    return LoopConfig(instances=tmp_path / "train.jsonl", held_out=tmp_path / "held.jsonl",
                      student="HuggingFaceTB/SmolLM2-135M-Instruct", teachers="a=openai/a,b=openai/b",
                      out=tmp_path / "out", **changes)


def module_args(argv: list[str], module: str) -> list[str]:
    """The flags after `python -m MODULE` (the loop runs each stage in a fresh interpreter)."""
    assert argv[1:3] == ["-m", module], argv
    return argv[3:]


@pytest.mark.parametrize("fmt", ["dpo", "kto", "sft"])
def test_the_train_stage_is_read_by_replay_train_as_meant(tmp_path: Path, fmt: str) -> None:
    loop = config(tmp_path, format=fmt, max_length=2048, learning_rate=5e-5, cpu=True, max_steps=8,
                  train_args="--no-eval")
    parent = Student(round=1, folder="x", name="x", adapter=str(tmp_path / "round-1/adapter"))
    built = stages.train_argv(loop, 2, parent, tmp_path / "pairs", tmp_path / "adapter")
    argv = module_args(built, "replay.train")
    assert argv[0] == fmt
    args = train_parser(fmt).parse_args(argv[1:])
    assert (args.dataset, args.output) == (tmp_path / "pairs", tmp_path / "adapter")
    assert (args.model, str(args.adapter)) == (loop.student, parent.adapter)   # round 0's, round 1's LoRA
    assert (args.max_length, args.learning_rate, args.max_steps, args.cpu, args.no_eval) == (
        2048, 5e-5, 8, True, True)

    full = config(tmp_path, format=fmt, lora_r=0)   # no LoRA: round 1's own weights go on training
    args = train_parser(fmt).parse_args(module_args(stages.train_argv(full, 2, parent, tmp_path, tmp_path),
                                                    "replay.train")[1:])
    assert (args.model, args.adapter, args.lora_r) == ("x", None, 0)


@pytest.mark.parametrize("fmt", ["dpo", "kto", "sft"])
def test_the_pairs_stage_is_read_by_replay_run_as_meant(tmp_path: Path, fmt: str) -> None:
    loop = config(tmp_path, format=fmt, max_length=4096, run_args="--max-states 50")
    argv = module_args(stages.run_argv(loop, tmp_path / "rollouts", tmp_path / "pairs", 0.2), "replay.run")
    args = run_parser().parse_args(argv)
    assert (args.format, args.test_split, args.max_length, args.max_states) == (fmt, 0.2, 4096, 50)
    assert args.cache == loop.cache and args.force                # one teacher cache across the loop


def test_with_verify_the_stage_runs_and_is_read_by_replay_verify(tmp_path: Path) -> None:
    assert stages.stage_names(1, verify=True) == ["collect", "pairs", "verify", "train", "resolve", "eval"]
    assert "verify" not in stages.stage_names(1, verify=False)
    assert "verify" not in stages.stage_names(0, verify=True)          # round 0 makes no pairs
    loop = config(tmp_path, verify=True, max_turns=7)
    built = stages.verify_argv(loop, URL, tmp_path / "pairs", tmp_path / "rollouts")
    argv = module_args(built, "replay.verify")
    args = verify_parser().parse_args(argv)
    assert (args.run, args.rollouts, args.instances) == (tmp_path / "pairs", tmp_path / "rollouts",
                                                          loop.instances)
    assert (args.student_url, args.max_turns) == (URL, 7)


def test_the_collect_and_eval_stages_are_read_as_meant(tmp_path: Path) -> None:
    loop = config(tmp_path, max_tokens=256, temperature=0.7, max_turns=5, collect_args="--workers 2")
    student = Student(round=1, folder="/m/round-1", name="/m/round-1")
    built = stages.collect_argv(loop, student, URL, loop.held_out, tmp_path / "resolve", 2, True, 3)
    argv = module_args(built, "collect.run")
    args = collect_args(argv)
    assert (args.student_url, args.student_model, args.samples, args.seed) == (URL, "/m/round-1", 2, 3)
    assert (args.evaluate, args.max_tokens, args.temperature, args.max_turns, args.workers) == (
        True, 256, 0.7, 5, 2)

    models = stages.eval_models([(Student(round=0, folder="f", name="f"), URL), (student, URL)])
    args = eval_parser().parse_args(module_args(stages.eval_argv(loop, models), "replay.eval"))
    assert args.run == loop.heldout_run and args.max_tokens == 256
    assert args.models == f"round-0=openai/f@{URL}#price=0/0,round-1=openai//m/round-1@{URL}#price=0/0"


def test_a_passed_on_value_that_is_one_flag_is_read_as_the_value(tmp_path: Path) -> None:
    """`--train-args --no-eval` and `--vllm-args --enforce-eager` (one flag each) were refused by argparse
    ("expected one argument"); they are the values, as a value of several flags always was."""
    from replay.loop.cli import attached, build_parser

    base = ["--instances", "t.jsonl", "--held-out", "h.jsonl", "--student", "m", "--teachers", "a",
            "--out", "o"]
    args = build_parser().parse_args(attached([*base, "--train-args", "--no-eval", "--vllm-args",
                                               "--enforce-eager", "--run-args", "--per-teacher 2"]))
    assert (args.train_args, args.vllm_args, args.run_args) == ("--no-eval", "--enforce-eager",
                                                                "--per-teacher 2")


def test_kto_with_a_batch_of_one_is_refused_before_anything_runs(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """TRL's KTO refuses a batch of one only once the model is loaded (a whole round's collect and pairs
    before, in the loop): replay.train and replay.loop say so up front."""
    from replay.loop.config import LoopError
    from replay.loop.run import check
    from replay.train.cli import main as train_main

    with pytest.raises(SystemExit) as stopped:
        train_main("kto", ["--dataset", str(tmp_path), "--model", "m", "--output", str(tmp_path / "o"),
                           "--batch-size", "1"])
    assert stopped.value.code == 2 and "KTO needs 2 or more" in capsys.readouterr().err
    for name in ("train.jsonl", "held.jsonl"):
        (tmp_path / name).write_text("")
    local = config(tmp_path).model_copy(update={"batch_size": 1})   # a Hub name: no folder checked
    with pytest.raises(LoopError, match="--format kto needs --batch-size 2"):
        check(local.model_copy(update={"format": "kto"}))
    check(local.model_copy(update={"format": "dpo"}))
