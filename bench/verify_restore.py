"""Restoring a rollout's state for `replay.verify`: replaying its own calls against snapshots taken while
collecting, seconds per branch, on the toy SWE-bench image (tests/collect_toy.py).

    python bench/verify_restore.py [--depths 1,4,8,16] [--repeats 3]

A rollout of `depth` turns is made for real in a container (after the answer-key scrub, as collect.run
does): `light` turns read and list files (milliseconds each), `tests` turns run the toy's test suite
(pytest, as a student does between edits); one turn in four edits calc.py. While it is made, the
container is committed after every turn: that is what a snapshot taken while collecting costs the
collection (seconds and bytes per turn). Then, per branch and repeated:
- replay: a fresh container of the instance image, the scrub, every recorded call run again and its
  observation compared with the record (collect/branch.py `replay_history`);
- snapshot: a fresh container of the image committed at the state (no scrub or replay);
- chosen (replay.verify, collect/snapshot.py): per branch of a state with 2 x 4 branches, the first
  replays and commits, the seven others start from its image: (replay + one commit + 7 snapshots) / 8.
Besides, for scale: one harness grading of the fixed patch (what every branch pays after its
continuation). Prints medians, with `uptime` beside them. Containers and images it made are removed.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from collect.answer_key import scrub  # noqa: E402
from collect.branch import replay_history  # noqa: E402
from collect.config import CollectConfig  # noqa: E402
from collect.instances import image_name  # noqa: E402
from collect.runtime import ContainerTracker, Runtime, docker_client, sweep  # noqa: E402
from collect.tools import execute  # noqa: E402
from ingestion.rollout_format import TurnRecord  # noqa: E402
from tests.collect_toy import NAMESPACE, ensure_instance_images, toy_instance  # noqa: E402

INSTANCE = "toy__calc-91"
RUN_ID = "verify-bench"
SNAPSHOTS = "teacher-replay-bench/snapshot"
COMMANDS = {"light": ["cat calc.py", "ls -la", "grep -n return calc.py"],
            "tests": ["python3 -m pytest -q -p no:cacheprovider tests/"]}


def call(turn: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    import json

    return {"id": f"call_{turn}", "type": "function", "function": {"name": name, "arguments": json.dumps(
        arguments)}}


def turn_calls(workload: str, depth: int) -> list[dict[str, Any]]:
    calls = []
    for turn in range(depth):
        if turn % 4 == 3:
            calls.append(call(turn, "edit", {"command": "create", "path": f"notes/{turn}.md",
                                             "file_text": f"turn {turn}\n"}))
        else:
            commands = COMMANDS[workload]
            calls.append(call(turn, "bash", {"command": commands[turn % len(commands)]}))
    return calls


def collect(runtime: Runtime, calls: list[dict[str, Any]], snapshot: str) -> tuple[list[TurnRecord], list,
                                                                                       float, int]:
    """The rollout made for real; with `snapshot`, the container committed after each turn (its images,
    the seconds and bytes that cost)."""
    turns, images, seconds, size = [], [], 0.0, 0
    for n, each in enumerate(calls):
        observation = execute(runtime, each)
        turns.append(TurnRecord(turn=n, messages=[], response={"role": "assistant", "tool_calls": [each]},
                                observations=[observation]))
        if snapshot:
            started = time.monotonic()
            image = runtime.container.commit(repository=SNAPSHOTS, tag=f"{snapshot}-t{n}")
            seconds += time.monotonic() - started
            size += image.attrs.get("Size", 0) - (images[-1].attrs.get("Size", 0) if images else
                                                   runtime.client.images.get(runtime.container.image.id)
                                                   .attrs.get("Size", 0))
            images.append(image)
    return turns, images, seconds, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", default="1,4,8,16")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = CollectConfig(instances=Path(tmp, "i.jsonl"), student_url="http://127.0.0.1:9/v1",
                               student_model="student", out=Path(tmp))
        client = docker_client(config)
        tag = ensure_instance_images(client, [INSTANCE])
        image = image_name(INSTANCE, NAMESPACE, tag)
        tracker = ContainerTracker()
        print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
        print("| workload | depth | replay s/branch | mismatches (all repeats) | snapshot s/branch | "
              "commit s/turn (collecting) | snapshot MB/turn | chosen s/branch (N=4) |")
        print("|---|---|---|---|---|---|---|---|")
        try:
            for workload in COMMANDS:
                for depth in map(int, args.depths.split(",")):
                    row = bench_one(client, config, tracker, image, workload, depth, args.repeats)
                    chosen = (row[0] + row[3] + 7 * row[2]) / 8
                    print(f"| {workload} | {depth} | {row[0]:.2f} | {row[1]} | {row[2]:.2f} | {row[3]:.2f} | "
                          f"{row[4]:.2f} | {chosen:.2f} |", flush=True)
            graded = grading(client, config, tracker, image, Path(tmp))
            print(f"\none harness grading of the fix: {graded:.1f} s")
        finally:
            tracker.close()
            sweep(client, RUN_ID)
            for made in client.images.list(name=SNAPSHOTS):
                client.images.remove(made.id, force=True)


def bench_one(client: Any, config: CollectConfig, tracker: ContainerTracker, image: str, workload: str,
              depth: int, repeats: int) -> tuple[float, str, float, float, float]:
    calls = turn_calls(workload, depth)
    fresh = Runtime(client, config, tracker)
    with fresh.start(image, RUN_ID, INSTANCE, attempt=f".{workload}{depth}") as made:
        scrub(made, None, "none")
        turns, images, commit_s, size = collect(made, calls, snapshot=f"{workload}{depth}")
    replays, snapshots, mismatches, volatile = [], [], 0, 0
    for repeat in range(repeats):
        started = time.monotonic()
        with Runtime(client, config, tracker).start(image, RUN_ID, INSTANCE, attempt=f".r{repeat}") as box:
            scrub(box, None, "none")
            _, found, masked = replay_history(box, turns)
            mismatches, volatile = mismatches + len(found), volatile + masked
            for each in found[:1] if repeat == 0 else ():      # what differed, to see why
                print(f"  {workload} {depth}: {each.recorded!r} != {each.replayed!r}", file=sys.stderr)
        replays.append(time.monotonic() - started)
        started = time.monotonic()
        with Runtime(client, config, tracker).start(images[-1].id, RUN_ID, INSTANCE,
                                                    attempt=f".s{repeat}") as box:
            box.run("true")                # the container answers: as far as a replay gets before its calls
        snapshots.append(time.monotonic() - started)
    return (statistics.median(replays), f"{mismatches} ({volatile} volatile)", statistics.median(snapshots),
            commit_s / depth, size / depth / 1e6)


def grading(client: Any, config: CollectConfig, tracker: ContainerTracker, image: str, tmp: Path) -> float:
    """One harness grading of the toy's fix (the patch taken from a container, as a branch takes it)."""
    from collect.evaluate import grade_patch, use_log_dir

    use_log_dir(tmp / "eval_logs")
    with Runtime(client, config, tracker).start(image, RUN_ID, INSTANCE, attempt=".fix") as box:
        execute(box, call(0, "edit", {"command": "str_replace", "path": "calc.py",
                                      "old_str": "def add(a, b):\n    return a - b",
                                      "new_str": "def add(a, b):\n    return a + b"}))
        patch = box.diff()
    started = time.monotonic()
    grade = grade_patch(client, toy_instance(INSTANCE, "fix"), image, patch, "student", RUN_ID, 600,
                        tmp / "eval_logs")
    assert grade.reward == 1.0, grade
    return time.monotonic() - started


if __name__ == "__main__":
    main()
