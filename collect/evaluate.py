"""The reward: grade a rollout's patch with the swebench harness on the prebuilt instance image.

swebench>=5 runs `run_instance(test_spec, prediction, client, run_id, timeout)`: a fresh container from
the instance image, `git apply` of the patch, the instance's own eval_script, its log parser. It writes
logs under `RUN_EVALUATION_LOG_DIR/<run_id>/<model>/<instance_id>/` and names its container
`sweb.eval.<instance_id>.<run_id>`, which is why the run id is in it: an interrupt sweeps by that name.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collect.instances import eval_instance

_LOG_DIR_LOCK = threading.Lock()


@dataclass
class Grade:
    reward: float | None
    resolved: bool | None = None
    report: dict[str, Any] | None = None
    error: str | None = None


def use_log_dir(path: Path) -> None:
    """Send the harness's logs to `path` instead of ./logs/run_evaluation (a module-level constant there).

    Process-wide: every rollout of a run shares one output folder, so one setting serves them all.
    """
    from swebench.harness import run_evaluation

    with _LOG_DIR_LOCK:
        path.mkdir(parents=True, exist_ok=True)
        run_evaluation.RUN_EVALUATION_LOG_DIR = path


def grade_patch(client: Any, row: dict[str, Any], image: str, patch: str, model: str, run_id: str,
                timeout: int, log_dir: Path) -> Grade:
    """1.0 if the harness says resolved, 0.0 if it ran and did not, None (with an error) if it could not."""
    if not patch.strip():
        return Grade(reward=0.0, resolved=False, error=None)   # an empty patch resolves nothing
    from swebench.harness.constants import APPLY_PATCH_FAIL, LOG_INSTANCE
    from swebench.harness.run_evaluation import run_instance
    from swebench.harness.utils import make_test_spec

    instance_id = row["instance_id"]
    try:
        spec = make_test_spec(eval_instance(row, image))
    except (KeyError, ValueError, TypeError) as exc:
        return Grade(reward=None, error=f"cannot build the swebench test spec: {exc!r}")
    prediction = {"instance_id": instance_id, "model_name_or_path": model, "model_patch": patch}
    outcome = run_instance(spec, prediction, client, run_id, timeout=timeout)
    if outcome is not None:
        report = outcome[1].get(instance_id, {})
        resolved = bool(report.get("resolved"))
        return Grade(reward=1.0 if resolved else 0.0, resolved=resolved, report=report)
    # run_instance logs and swallows its errors; its log says whether the patch was at fault.
    log = log_dir / run_id / model.replace("/", "__") / instance_id / LOG_INSTANCE
    text = log.read_text(errors="replace") if log.is_file() else ""
    if APPLY_PATCH_FAIL in text:
        return Grade(reward=0.0, resolved=False, error="the patch does not apply")
    if "Test timed out" in text:
        return Grade(reward=0.0, resolved=False, error=f"the tests timed out after {timeout} s")
    last = next((line for line in reversed(text.splitlines()) if line.strip()), "no log")
    return Grade(reward=None, error=f"the swebench harness failed: {last[:300]} (log: {log})")
