"""One collect run: every instance in its own container, `--workers` at a time, one report at the end.

A failing instance never stops the others. On Ctrl-C (KeyboardInterrupt in the main thread) the run
stops handing out instances, removes every container it started (the workers' commands then fail
fast), gives the workers a moment to write their final records, and still writes report.json.
"""

from __future__ import annotations

import copy
import logging
import queue
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from collect.agent import AgentResult, run_agent
from collect.answer_key import scrub
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
from collect.probe import ServerInfo, probe
from collect.records import RolloutWriter
from collect.reply import resolve_echo
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
from collect.student import Backend, Student
from ingestion.rollout_format import GRADED, FinalRecord, RolloutHeader

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
    servers: list[tuple[Backend, ServerInfo]] = field(default_factory=list)   # the student's, then others
    labels: dict[str, str] = field(default_factory=dict)   # more container labels (collect/cluster.py)
    attempt: str = ""                      # container name suffix of a task Ray may run again


def new_run_id() -> str:
    return f"collect-{datetime.now(UTC):%Y%m%dT%H%M%S}-{secrets.token_hex(3)}"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def collect_rollouts(config: CollectConfig, claude: Any = None) -> RunReport:
    """Roll out every instance of `config.instances`; write DIR/<id>.rollout.jsonl and DIR/report.json.

    `claude` (ClaudeCodeOptions) runs Claude Code instead of the bash/edit loop (collect/claude_code.py).
    """
    rows = load_instances(config.instances)
    spec = load_agent_spec()
    student = Student(config, think_tags=spec.think_tags)
    targets = [(student.backend, config.student_model)]
    if claude is not None and (claude.small_url or claude.small_backend):
        small = Backend(claude.small_url, config.api_key, config.student_provider, config.request_timeout) \
            if claude.small_url and claude.small_url != config.student_url else student.backend
        targets.append((small, claude.small_backend or config.student_model))
    # Before docker and before any output: a server that cannot serve the agent is one line, exit 2.
    servers = [(backend, probe(backend, model, spec, student.sampling)) for backend, model in targets]
    run = Run(config, spec, docker_client(config), student, new_run_id(), duplicates=duplicates(rows),
              servers=servers)
    try:
        config.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CollectError(f"cannot create the output folder {config.out}: {exc.strerror}") from exc
    if claude is not None:
        from collect.claude_code import ClaudeCodeAgent

        run.agent = ClaudeCodeAgent(claude, config, run.client, run.run_id, [b for b, _ in servers])
        run.agent.start(rows)              # a missing CLI is a CollectError here, before any rollout
    if config.evaluate:
        use_log_dir(config.out / "eval_logs")
    report = RunReport(run_id=run.run_id, student_model=config.student_model, student_url=config.student_url,
                       student_provider=config.student_provider, sampling=student.sampling,
                       logprobs_mode=_logprobs_mode(config), evaluate=config.evaluate, started_at=_now(),
                       instances=len(rows), seed=config.seed)
    jobs: queue.SimpleQueue[tuple[int, Any, int]] = queue.SimpleQueue()
    for index, row in enumerate(rows):
        for sample in range(samples_of(row, index, run.duplicates, config)):
            jobs.put((index, row, sample))
    lock = threading.Lock()

    def work() -> None:
        while not run.stop.is_set():
            try:
                index, row, sample = jobs.get_nowait()
            except queue.Empty:
                return
            outcome = run_instance(run, row, index, sample)
            with lock:
                report.add(outcome)
            log.info("%s: %s", outcome.instance_id, _describe(outcome))

    # Daemon threads: a worker stuck in a long student request must not keep an interrupted process alive.
    threads = [threading.Thread(target=work, name=f"collect-{n}", daemon=True)
               for n in range(min(config.workers, len(rows) * config.samples))]
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
            report.servers = [info.model_copy(update={"token_extension_dropped": backend.dropped})
                              for backend, info in run.servers]
            write_report(report, config.out / "report.json")
    return report


def _logprobs_mode(config: CollectConfig) -> str | None:
    return None if config.student_provider else config.logprobs_mode   # official APIs: no token logprobs


def _describe(outcome: InstanceOutcome) -> str:
    if outcome.error_kind and outcome.rollout_file is None:
        return f"{outcome.error_kind}: {outcome.error}"
    text = f"{outcome.exit_status} after {outcome.turns} turns"
    if outcome.error_kind and outcome.error_kind != outcome.exit_status:
        text += f" ({outcome.error_kind})"
    return text + (f": {outcome.error}" if outcome.error and outcome.error != "interrupted" else "") + (
        f", reward {outcome.reward}" if outcome.reward is not None else "")


def samples_of(row: Any, index: int, repeated: dict[int, str], config: CollectConfig) -> int:
    """How many rollouts a row gets: --samples, or one outcome (its error) for a row that cannot run."""
    return config.samples if check_instance(row, config.evaluate) is None and index not in repeated else 1


def run_instance(run: Run, row: Any, index: int, sample: int = 0) -> InstanceOutcome:
    """One (instance, sample), start to finish; any failure becomes its outcome, never the run's."""
    label, started = instance_label(row, index), time.monotonic()
    try:
        outcome = _rollout(run, row, index, label, sample)
    except Interrupted:
        outcome = InstanceOutcome(instance_id=label, error_kind="interrupted", error="interrupted")
    except Exception as exc:  # a bug or an engine failure on one instance must not stop the others
        log.exception("%s: unexpected error", label)
        outcome = InstanceOutcome(instance_id=label, error_kind="internal_error", error=repr(exc)[:500])
    outcome.elapsed_s = round(time.monotonic() - started, 3)
    outcome.sample = sample
    return outcome


def _rollout(run: Run, row: Any, index: int, label: str, sample: int = 0) -> InstanceOutcome:
    config = run.config
    problem = check_instance(row, config.evaluate) or run.duplicates.get(index)
    if problem:
        return InstanceOutcome(instance_id=label, error_kind="invalid_instance", error=problem)
    instance_id = row["instance_id"]
    image = image_name(instance_id, config.namespace, config.image_tag)
    runtime = Runtime(run.client, config, run.tracker)
    try:
        ensure_image(run.client, image, config.pull)
        runtime.start(image, run.run_id, instance_id, network=run.agent.network_name if run.agent else "none",
                      labels=run.labels, attempt=(f".s{sample}" if sample else "") + run.attempt)
    except ImageMissing as exc:
        return InstanceOutcome(instance_id=label, error_kind="image_not_found", error=str(exc))
    except RuntimeFailure as exc:
        return InstanceOutcome(instance_id=label, error_kind="container_error", error=str(exc))
    network = run.agent.network_name if run.agent else "none"
    try:
        check = scrub(runtime, row.get("base_commit"), network)
    except RuntimeFailure as exc:
        runtime.remove()
        return InstanceOutcome(instance_id=label, error_kind="container_error", error=str(exc))
    except Interrupted:
        runtime.remove()
        raise
    if not check.ok:                       # the agent never sees a container that holds the fix
        runtime.remove()
        return InstanceOutcome(instance_id=label, error_kind="answer_key_visible",
                               error=f"{check.error} (git history of /testbed)")
    path = run.agent.rollout_path(instance_id, sample) if run.agent else config.out / rollout_filename(
        instance_id, sample)
    try:
        with RolloutWriter(path) as writer:
            header = _header(run, row, image, sample)
            header.answer_key = check.model_dump()
            writer.write(run.agent.header(header) if run.agent else header)
            final, result = _drive(run, row, image, runtime, writer, sample)
            writer.write(final)
    finally:
        runtime.remove()
    return final_outcome(instance_id, str(path.relative_to(config.out)), final, result.turns_with_token_ids,
                         config.evaluate, result.prefix_breaks, dict(result.break_reasons))


def final_outcome(instance_id: str, rollout_file: str, final: FinalRecord, token_turns: int,
                  evaluate: bool, prefix_breaks: int = 0,
                  break_reasons: dict[str, int] | None = None) -> InstanceOutcome:
    """A written rollout's outcome, from its final record (also how a rerun reads a finished one back).

    >>> final = FinalRecord(exit_status="submitted", turns=2)
    >>> final_outcome("a", "a.rollout.jsonl", final, 2, evaluate=True).error_kind
    'evaluation_error'
    """
    failed_grade = evaluate and final.exit_status in GRADED and final.reward is None
    kind = ERROR_KIND.get(final.exit_status) or ("evaluation_error" if failed_grade else None)
    return InstanceOutcome(instance_id=instance_id, rollout_file=rollout_file, exit_status=final.exit_status,
                           turns=final.turns, turns_with_token_ids=token_turns, prefix_breaks=prefix_breaks,
                           prefix_break_reasons=break_reasons or {},
                           reward=final.reward,
                           resolved=final.resolved, error_kind=kind, error=final.error)


def _header(run: Run, row: dict[str, Any], image: str, sample: int = 0) -> RolloutHeader:
    info = run.servers[0][1] if run.servers else None
    rollout_id = f"{row['instance_id']}.{run.run_id}" + (f".s{sample}" if sample else "")
    return RolloutHeader(
        rollout_id=rollout_id, run_id=run.run_id, instance_id=row["instance_id"], sample=sample,
        repo=row.get("repo"), base_commit=row.get("base_commit"), image=image,
        student_model=run.config.student_model, student_url=run.config.student_url,
        student_provider=run.config.student_provider, sampling=_sampling(run, row["instance_id"], sample),
        logprobs_mode=_logprobs_mode(run.config),
        reasoning_echo=resolve_echo(run.config.reasoning_echo, info.reasoning_field if info else None),
        max_model_len=info.max_model_len if info else None,
        max_turns=run.config.max_turns, agent_version=run.spec.version, tools=run.spec.tools,
        created_at=_now())


def _sampling(run: Run, instance_id: str, sample: int) -> dict[str, Any]:
    """What one rollout sends: the run's sampling, and its own seed with --seed."""
    seed = run.config.seed_of(instance_id, sample)
    return {**run.student.sampling, **({"seed": seed} if seed is not None else {})}


def _drive(run: Run, row: dict[str, Any], image: str, runtime: Runtime, writer: RolloutWriter,
           sample: int = 0) -> tuple[FinalRecord, AgentResult]:
    """The agent, then the patch, then (with --evaluate) the grade; the container is gone before grading."""
    started = time.monotonic()
    if run.agent is not None:
        result = run.agent.drive(runtime, row, run.stop, sample)
    else:
        student = copy.copy(run.student)           # the sample's seed, if any, on top of the run's sampling
        student.sampling = _sampling(run, row["instance_id"], sample)
        result = run_agent(student, runtime, run.spec, row["problem_statement"], writer,
                           run.config.max_turns, run.stop)
    final = FinalRecord(exit_status=result.exit_status, turns=result.turns, error=result.error)
    if result.exit_status != "interrupted":
        try:
            final.patch = runtime.diff()
        except (RuntimeFailure, Interrupted) as exc:
            final.exit_status = "interrupted" if run.stop.is_set() else "runtime_error"
            final.error = final.error or str(exc) or "interrupted"
    runtime.remove()
    graded = final.exit_status in GRADED and final.patch is not None
    if run.config.evaluate and graded and not run.stop.is_set():
        # the harness names its container and log folder after the run id: one per sample
        grade_id = run.run_id + (f".s{sample}" if sample else "")
        grade = grade_patch(run.client, row, image, final.patch, run.config.student_model, grade_id,
                            run.config.eval_timeout, run.config.out / "eval_logs")
        final.reward, final.resolved = grade.reward, grade.resolved
        final.evaluation = grade.report or ({"error": grade.error} if grade.error else None)
        if run.stop.is_set():
            final.exit_status, final.reward, final.error = "interrupted", None, "interrupted"
        elif grade.reward is None:
            final.error = "; ".join(e for e in (final.error, grade.error) if e)   # an overflow keeps its why
    if final.exit_status == "interrupted":
        final.error = final.error or "interrupted"
    final.elapsed_s = round(time.monotonic() - started, 3)
    return final, result
