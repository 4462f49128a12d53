"""One collect run: every instance in its own container, `--workers` at a time, one report at the end.

A failing instance never stops the others. On Ctrl-C (KeyboardInterrupt in the main thread) the run
stops handing out instances, removes every container it started (the workers' commands then fail
fast), gives the workers a moment to write their final records, and still writes report.json.
"""

from __future__ import annotations

import logging
import queue
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from collect.agent import run_agent
from collect.config import AgentSpec, CollectConfig, CollectError, load_agent_spec
from collect.evaluate import grade_patch, use_log_dir
from collect.instances import (
    check_instance,
    duplicates,
    image_name,
    instance_label,
    load_instances,
    rollout_filename,
)
from collect.records import RolloutWriter
from collect.report import InstanceOutcome, RunReport, write_report
from collect.runtime import (
    ContainerTracker,
    ImageMissing,
    Interrupted,
    Runtime,
    RuntimeFailure,
    docker_client,
    ensure_image,
    sweep,
)
from collect.student import Student
from ingestion.rollout_format import FinalRecord, RolloutHeader

log = logging.getLogger("collect")
INTERRUPT_GRACE_S = 10.0
ERROR_KIND = {status: status for status in ("student_error", "runtime_error", "interrupted")}


@dataclass
class Run:
    config: CollectConfig
    spec: AgentSpec
    client: Any
    student: Any
    run_id: str
    duplicates: dict[int, str] = field(default_factory=dict)
    tracker: ContainerTracker = field(default_factory=ContainerTracker)
    stop: threading.Event = field(default_factory=threading.Event)
    agent: Any = None                  # a ClaudeCodeAgent (--agent claude-code); None: the bash/edit loop


def new_run_id() -> str:
    return f"collect-{datetime.now(UTC):%Y%m%dT%H%M%S}-{secrets.token_hex(3)}"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def collect_rollouts(config: CollectConfig, claude: Any = None) -> RunReport:
    """Roll out every instance of `config.instances`; write DIR/<id>.rollout.jsonl and DIR/report.json.

    `claude` (ClaudeCodeOptions) runs Claude Code instead of the bash/edit loop (collect/claude_code.py).
    """
    rows = load_instances(config.instances)
    run = Run(config, load_agent_spec(), docker_client(config), Student(config), new_run_id(),
              duplicates=duplicates(rows))
    try:
        config.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CollectError(f"cannot create the output folder {config.out}: {exc.strerror}") from exc
    if claude is not None:
        from collect.claude_code import ClaudeCodeAgent

        run.agent = ClaudeCodeAgent(claude, config, run.client, run.run_id)
        run.agent.start(rows)              # a missing CLI is a CollectError here, before any rollout
    if config.evaluate:
        use_log_dir(config.out / "eval_logs")
    report = RunReport(run_id=run.run_id, student_model=config.student_model, student_url=config.student_url,
                       evaluate=config.evaluate, started_at=_now(), instances=len(rows))
    jobs: queue.SimpleQueue[tuple[int, Any]] = queue.SimpleQueue()
    for job in enumerate(rows):
        jobs.put(job)
    lock = threading.Lock()

    def work() -> None:
        while not run.stop.is_set():
            try:
                index, row = jobs.get_nowait()
            except queue.Empty:
                return
            outcome = run_instance(run, row, index)
            with lock:
                report.add(outcome)
            log.info("%s: %s", outcome.instance_id, _describe(outcome))

    # Daemon threads: a worker stuck in a long student request must not keep an interrupted process alive.
    threads = [threading.Thread(target=work, name=f"collect-{n}", daemon=True)
               for n in range(min(config.workers, len(rows)))]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    except KeyboardInterrupt:
        report.interrupted = True
        run.stop.set()
        run.tracker.close()
        sweep(run.client, run.run_id)
        deadline = time.monotonic() + INTERRUPT_GRACE_S
        for thread in threads:
            thread.join(max(deadline - time.monotonic(), 0))
    finally:
        sweep(run.client, run.run_id)      # nothing of this run outlives it, whatever happened
        if run.agent is not None:
            run.agent.close()              # its network, once no container is left on it
        with lock:
            report.finished_at = _now()
            write_report(report, config.out / "report.json")
    return report


def _describe(outcome: InstanceOutcome) -> str:
    if outcome.error_kind and outcome.rollout_file is None:
        return f"{outcome.error_kind}: {outcome.error}"
    text = f"{outcome.exit_status} after {outcome.turns} turns"
    if outcome.error_kind and outcome.error_kind != outcome.exit_status:
        text += f" ({outcome.error_kind})"
    return text + (f": {outcome.error}" if outcome.error and outcome.error != "interrupted" else "") + (
        f", reward {outcome.reward}" if outcome.reward is not None else "")


def run_instance(run: Run, row: Any, index: int) -> InstanceOutcome:
    """One instance, start to finish; any failure becomes this instance's outcome, never the run's."""
    label, started = instance_label(row, index), time.monotonic()
    try:
        outcome = _rollout(run, row, index, label)
    except Interrupted:
        outcome = InstanceOutcome(instance_id=label, error_kind="interrupted", error="interrupted")
    except Exception as exc:  # a bug or an engine failure on one instance must not stop the others
        log.exception("%s: unexpected error", label)
        outcome = InstanceOutcome(instance_id=label, error_kind="internal_error", error=repr(exc)[:500])
    outcome.elapsed_s = round(time.monotonic() - started, 3)
    return outcome


def _rollout(run: Run, row: Any, index: int, label: str) -> InstanceOutcome:
    config = run.config
    problem = check_instance(row, config.evaluate) or run.duplicates.get(index)
    if problem:
        return InstanceOutcome(instance_id=label, error_kind="invalid_instance", error=problem)
    instance_id = row["instance_id"]
    image = image_name(instance_id, config.namespace, config.image_tag)
    runtime = Runtime(run.client, config, run.tracker)
    try:
        ensure_image(run.client, image, config.pull)
        runtime.start(image, run.run_id, instance_id, network=run.agent.network_name if run.agent else "none")
    except ImageMissing as exc:
        return InstanceOutcome(instance_id=label, error_kind="image_not_found", error=str(exc))
    except RuntimeFailure as exc:
        return InstanceOutcome(instance_id=label, error_kind="container_error", error=str(exc))
    path = run.agent.rollout_path(instance_id) if run.agent else config.out / rollout_filename(instance_id)
    try:
        with RolloutWriter(path) as writer:
            header = _header(run, row, image)
            writer.write(run.agent.header(header) if run.agent else header)
            final, token_turns = _drive(run, row, image, runtime, writer)
            writer.write(final)
    finally:
        runtime.remove()
    kind = ERROR_KIND.get(final.exit_status) or ("evaluation_error" if final.error else None)
    return InstanceOutcome(instance_id=instance_id, rollout_file=str(path.relative_to(config.out)),
                           exit_status=final.exit_status,
                           turns=final.turns, turns_with_token_ids=token_turns, reward=final.reward,
                           resolved=final.resolved, error_kind=kind, error=final.error)


def _header(run: Run, row: dict[str, Any], image: str) -> RolloutHeader:
    return RolloutHeader(
        rollout_id=f"{row['instance_id']}.{run.run_id}", run_id=run.run_id, instance_id=row["instance_id"],
        repo=row.get("repo"), base_commit=row.get("base_commit"), image=image,
        student_model=run.config.student_model, student_url=run.config.student_url,
        sampling=dict(run.student.sampling), max_turns=run.config.max_turns, agent_version=run.spec.version,
        tools=run.spec.tools, created_at=_now())


def _drive(run: Run, row: dict[str, Any], image: str, runtime: Runtime,
           writer: RolloutWriter) -> tuple[FinalRecord, int]:
    """The agent, then the patch, then (with --evaluate) the grade; the container is gone before grading."""
    started = time.monotonic()
    if run.agent is not None:
        result = run.agent.drive(runtime, row, run.stop)
    else:
        result = run_agent(run.student, runtime, run.spec, row["problem_statement"], writer,
                           run.config.max_turns, run.stop)
    final = FinalRecord(exit_status=result.exit_status, turns=result.turns, error=result.error)
    if result.exit_status != "interrupted":
        try:
            final.patch = runtime.diff()
        except (RuntimeFailure, Interrupted) as exc:
            final.exit_status = "interrupted" if run.stop.is_set() else "runtime_error"
            final.error = final.error or str(exc) or "interrupted"
    runtime.remove()
    graded = final.exit_status in ("submitted", "max_turns") and final.patch is not None
    if run.config.evaluate and graded and not run.stop.is_set():
        grade = grade_patch(run.client, row, image, final.patch, run.config.student_model, run.run_id,
                            run.config.eval_timeout, run.config.out / "eval_logs")
        final.reward, final.resolved = grade.reward, grade.resolved
        final.evaluation = grade.report or ({"error": grade.error} if grade.error else None)
        if run.stop.is_set():
            final.exit_status, final.reward, final.error = "interrupted", None, "interrupted"
        elif grade.reward is None:
            final.error = grade.error
    if final.exit_status == "interrupted":
        final.error = final.error or "interrupted"
    final.elapsed_s = round(time.monotonic() - started, 3)
    return final, result.turns_with_token_ids
