"""The dataset card, `DIR/README.md`: a Hugging Face dataset card (YAML header: `configs`, `license`,
`task_categories`, `tags`, `size_categories`) with provenance, counts, columns, token lengths, chat
template pass rates, cost, the command and how to train on it.

The card is made to be shared (`--push-to-hub`): it names no local path, host, URL or key. The command
is shown with paths and endpoint URLs replaced (`public_command`), and the whole text is scrubbed once
more before it is written (`scrub`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from replay.decide.hindsight import hindsight_lines
from replay.options import RunConfig
from replay.rundir.report import Report
from replay.verification.card import COLUMN_DOCS as VERIFY_DOCS
from replay.verification.card import verify_lines

COLUMN_DOCS = {
    "prompt": "the context before the turn: OpenAI chat messages (system prompt first; tool calls with "
              "arguments as objects; tool results carry the tool's `name`)",
    "chosen": "the teachers' consensus, one assistant message",
    "rejected": "what the student really did, one assistant message",
    "tools": "the OpenAI tool schemas of the trace (one list per trace)",
    "state_id": "`<source>:<trace_id>:<turn>`, stable across runs",
    "trace_id": "the session (or rollout) the turn comes from; splits never share one",
    "turn": "0-based index of the assistant turn in its trace",
    "source": "the log's format: `claude_code`, `swebench_rollout`, `codex`, `gemini`, `copilot`, "
              "`mini_swe_agent`, `swe_agent`, `openhands`, `atif`, `trajectory_dataset`",
    "student_model": "the student's model (it wrote `rejected`, and the assistant turns of `prompt`)",
    "teachers": "the teachers that voted",
    "winner_teachers": "the teachers whose answer is the consensus",
    "votes": "weight and teachers of each group of equivalent answers, winner first",
    "agreement": "the winning group's share of the votes",
    "method": "the consensus method",
    "match": "the tier of equivalence that decided the consensus (`exact` or `intent`)",
    "cost_usd": "USD of the teacher calls for this state",
    "preflight": "chat template name → problems rendering this row through it ([] = trains as is)",
    "student_outcome": "what the student's own action led to: `ok`, `error`, `rejected` (by the user), "
                       "`interrupted`, `no_result`; null where the source recorded no outcome",
    "completion": "one assistant message: the teachers' consensus, or (KTO, `label` false) the student's "
                  "failed action",
    "label": "KTO: true = desirable (the consensus), false = undesirable (a student action that failed)",
    "verdict": "the state's verdict: `pair` (student differs from the consensus), `agree`, `abstained` "
               "(no consensus)",
    "completion_from": "`consensus` or `student`",
    **VERIFY_DOCS,
}
_SIZES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"))
_PROVENANCE = (("sources", "Sources"), ("student_models", "Student models"), ("teachers", "Teachers"),
               ("excluded_teachers", "Excluded teachers (same family as the student)"),
               ("method", "Consensus method"), ("min_agreement", "Minimum agreement"))
_KNOWN = {key for key, _ in _PROVENANCE} | {"pairs", "counts", "cost_usd", "command", "pretty_name",
                                           "license", "lengths", "templates", "max_length", "splits",
                                           "columns", "confidence", "unpriced", "format", "rows",
                                           "hindsight", "verify"}
_INTRO = {
    "dpo": """DPO preference pairs made by teacher-replay: at each assistant turn of an agent trace, a pool of
teacher LLMs answered; their consensus is `chosen`, the student's real action is `rejected`.""",
    "kto": """KTO (unpaired preference) rows made by teacher-replay: at each assistant turn of an agent
trace, a pool of teacher LLMs answered. Their consensus is a desirable `completion` (`label` true)
wherever they reached one (whether the student differed or agreed); a student action that failed
(`student_outcome` `error`, `rejected` or `interrupted`) is an undesirable one (`label` false), also
where the teachers abstained. Where the student agreed with the teachers and its action failed, the
state gives no row: the teachers endorsed what failed, so neither label is trusted.""",
    "sft": """Supervised rows made by teacher-replay (conversational prompt-completion): at each assistant
turn of an agent trace, a pool of teacher LLMs answered; `completion` is their consensus (states where
the student differed from it, and where it agreed, unless its action then failed). SFTTrainer trains
on the completion only (`completion_only_loss`), never on the student's earlier turns in `prompt`.""",
}
_TRAINER = {"dpo": "DPOTrainer", "kto": "KTOTrainer", "sft": "SFTTrainer"}
_TAGS = {"dpo": ["dpo", "preference"], "kto": ["kto", "unpaired-preference"], "sft": ["sft"]}
# Flags whose value is a local path; tokenizers may also be Hub names (`org/name`, kept).
# (--project / --exclude-project: their globs name the user's projects)
_PATH_FLAGS = {"--source", "--out", "--cache", "--run", "--project", "--exclude-project"}
_TOKENIZER_FLAGS = {"--tokenizer", "--preflight-tokenizer", "--preflight-template"}
_ENDPOINT_FLAGS = {"--teachers", "--judge"}
_PLAIN = re.compile(r"[\w@%+=:,./<>-]+")
_HUB_NAME = re.compile(r"[\w.-]+(?:/[\w.-]+)?")
_URL = re.compile(r"[A-Za-z][\w+.-]*://[^\s'\"`|)]+")
_PATH = re.compile(r"(?<![\w<>.])(?:~|/)[\w.@%+-]*(?:/[\w.@%+*-]+)+/?")
_HOST = re.compile(r"\b(?:(?:\d{1,3}\.){3}\d{1,3}|localhost)(?::\d+)?\b")


def scrub(text: str) -> str:
    """Replace URLs, absolute paths, hosts and secrets in a text by placeholders.

    >>> scrub("read /home/me/.claude via http://10.0.0.2:8000/v1 and 127.0.0.1:9, 1/8 of prompt/chosen")
    'read <path> via <url> and <host>, 1/8 of prompt/chosen'
    """
    from teachers.scrub import scrub as scrub_keys  # every key the process knows, then the secret rules

    return scrub_keys(_HOST.sub("<host>", _PATH.sub("<path>", _URL.sub("<url>", text))))


def _public_value(flag: str, value: str) -> str:
    if flag in _PATH_FLAGS:
        return "<path>"
    if flag in _ENDPOINT_FLAGS:
        return ",".join(re.sub(r"@.*$", "@<url>", part) for part in value.split(","))
    if flag in _TOKENIZER_FLAGS:  # shipped template names and Hub names stay; local paths go
        return ",".join(part if _HUB_NAME.fullmatch(part) and not Path(part).exists() else "<path>"
                        for part in value.split(","))
    return value


def public_command(command: str) -> str:
    """The exact command with local paths and endpoint URLs replaced (Hub names are kept).

    >>> public_command("replay.run --source /home/me/proj --teachers a=openai/m@http://10.1.1.1:80/v1,gpt-5"
    ...                " --tokenizer=Qwen/Qwen3-8B --max-length 8192")
    'replay.run --source <path> --teachers a=openai/m@<url>,gpt-5 --tokenizer=Qwen/Qwen3-8B --max-length 8192'
    """
    try:
        words = shlex.split(command)
    except ValueError:
        return scrub(command)
    out: list[str] = []
    for index, word in enumerate(words):
        flag, eq, value = word.partition("=")
        if eq and flag.startswith("--"):
            out.append(f"{flag}={_public_value(flag, value)}")
        elif index and words[index - 1].startswith("--") and "=" not in words[index - 1]:
            out.append(_public_value(words[index - 1], word))
        else:
            out.append(word)
    # Quoted as a shell would need, except the placeholders (they are not meant to be run as they are).
    return scrub(" ".join(w if _PLAIN.fullmatch(w) else shlex.quote(w) for w in out))


def _size_category(n: int) -> str:
    return next((name for limit, name in _SIZES if n < limit), "n>1M")


def _show(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k} ({v})" for k, v in value.items()) or "none"
    if isinstance(value, list | tuple | set):
        return ", ".join(str(v) for v in value) or "none"
    return "none" if value is None else str(value)


def _configs(splits: Mapping[str, int] | None) -> list[dict[str, Any]]:
    files = ([{"split": name, "path": f"dataset/{name}/data-*.arrow"} for name in splits] if splits
             else [{"split": "train", "path": "dataset/data-*.arrow"}])
    return [{"config_name": "default", "data_files": files}]


def _lengths(lengths: Mapping[str, Any]) -> list[str]:
    points = list(lengths.get("total") or {})
    if not points:
        return []
    lines = ["## Token lengths", "", f"Counted with: {lengths.get('counted_with', 'estimate')} "
             "(prompt includes the tool schemas; total = prompt + the longer completion).", "",
             "| part | " + " | ".join("max" if p == "p100" else p for p in points) + " |",
             "|---" * (len(points) + 1) + "|"]
    for part in [key for key in lengths if key not in ("counted_with", "rows")]:
        lines.append(f"| {part} | " + " | ".join(str(lengths[part].get(p, "")) for p in points) + " |")
    return [*lines, ""]


def _templates(templates: Mapping[str, Any]) -> list[str]:
    if not templates:
        return []
    lines = ["## Chat templates", "",
             "Every row rendered through each template as TRL's trainers render it (the prompt with the "
             "generation prompt, then prompt + each completion, all with `tools=`); the `preflight` "
             "column lists each row's problems per template, so rows a template cannot express can be "
             "filtered out.", "", "| template | rows | pass | pass rate | problems |",
             "|---|---|---|---|---|"]
    for name, stats in templates.items():
        rate = stats.get("pass_rate")
        rate = "n/a" if rate is None else f"{100 * rate:.1f}%"
        lines.append(f"| {name} | {stats.get('rows', 0)} | {stats.get('passed', 0)} | {rate} | "
                     f"{_show(stats.get('problems', {}))} |")
    sources = [f"- **{name}**: {stats['source']}" for name, stats in templates.items() if stats.get("source")]
    return [*lines, "", *(["Sources:", "", *sources, ""] if sources else [])]


_TRAIN = {
    "dpo": ["from trl import DPOConfig, DPOTrainer", "args = DPOConfig(output_dir=\"dpo\", max_length={n})",
            "trainer = DPOTrainer(model=..., args=args, train_dataset=dataset, processing_class=tokenizer)"],
    "kto": ["from trl import KTOConfig, KTOTrainer",
            "args = KTOConfig(output_dir=\"kto\", max_length={n}, per_device_train_batch_size=8)",
            "trainer = KTOTrainer(model=..., args=args, train_dataset=dataset, processing_class=tokenizer)"],
    "sft": ["from trl import SFTConfig, SFTTrainer",
            "args = SFTConfig(output_dir=\"sft\", max_length={n})  # loss on `completion` only (default)",
            "trainer = SFTTrainer(model=..., args=args, train_dataset=dataset, processing_class=tokenizer)"],
}
_EXAMPLE = ("A runnable version, LoRA on the student's own chat template: `python examples/train_{fmt}.py "
            "--dataset DIR --model STUDENT` in the teacher-replay repository.")


def _use(info: Mapping[str, Any]) -> list[str]:
    fmt = info.get("format", "dpo")
    max_length = info.get("max_length")
    templates = list(info.get("templates") or {})
    head, config, trainer = _TRAIN[fmt]
    code = ["```python", "from datasets import load_from_disk", head, "",
            "dataset = load_from_disk(\"dataset\")" + ("[\"train\"]" if info.get("splits") else "")
            + "  # or load_dataset(<this repo>, split=\"train\")"]
    if templates:
        code.append(f"dataset = dataset.filter(lambda row: not row[\"preflight\"][\"{templates[0]}\"])"
                    f"  # rows {templates[0]} renders cleanly")
    code += [config.format(n=max_length), trainer, "```", ""]
    if max_length:
        counted = (info.get("lengths") or {}).get("counted_with", "estimate")
        text = (f"Train with `max_length={max_length}`: prompt + tools + the longer completion of every row "
                f"fit it, counted with {counted} (TRL's default, 1024, would drop or truncate most rows).")
    else:
        text = "No training length was recorded: set `max_length` to your model's context."
    return ["## Use", "", f"Load it into TRL's `{_TRAINER[fmt]}` as it is:", "", *code, text, "",
            _EXAMPLE.format(fmt=fmt), ""]


def card_text(info: Mapping[str, Any]) -> str:
    """The dataset card. Known `info` keys: pairs, sources, student_models, teachers, excluded_teachers,
    method, min_agreement, counts, cost_usd, command, license, lengths, templates, max_length, splits,
    columns; any other key is listed under "Run settings".

    >>> text = card_text({"pairs": 3, "teachers": ["gpt-5", "deepseek"], "command": "python -m replay.run"})
    >>> text.startswith("---\\n") and "python -m replay.run" in text and "gpt-5, deepseek" in text
    True
    """
    import yaml

    from replay.export.formats import COLUMNS

    fmt = info.get("format", "dpo")
    counts = dict(info.get("counts", {}))
    pairs = int(info.get("pairs", counts.get("pairs", 0)))
    rows = int(info.get("rows", pairs))
    name = {"dpo": "DPO pairs", "kto": "KTO rows", "sft": "SFT rows"}[fmt]
    header = {"pretty_name": info.get("pretty_name", f"teacher-replay {name}"),
              "license": info.get("license") or "unknown", "language": ["en"],
              "tags": [*_TAGS[fmt], "tool-calling", "agents", "trl", "teacher-replay"],
              "task_categories": ["text-generation"], "size_categories": [_size_category(rows)],
              "configs": _configs(info.get("splits"))}
    lines = ["---", yaml.safe_dump(header, sort_keys=False).strip(), "---", "",
             f"# {header['pretty_name']}", "", _INTRO[fmt], "", f"Format: `{fmt}` (`--format {fmt}`).", "",
             "## Provenance", ""]
    lines += [f"- **{label}**: {_show(info[key])}" for key, label in _PROVENANCE if key in info]
    lines += ["", "## Counts", "", "| count | n |", "|---|---|", f"| pairs | {pairs} |"]
    if fmt != "dpo":
        lines.append(f"| {fmt} rows | {rows} |")
    lines += [f"| {k} | {_show(v)} |" for k, v in counts.items() if k != "pairs"]
    lines += confidence_lines(info.get("confidence"))
    lines += hindsight_lines(info.get("hindsight"))
    lines += verify_lines(info.get("verify"))
    if splits := info.get("splits"):
        lines += ["", "Splits (grouped by `trace_id`, no trace in two splits): " + _show(splits) + "."]
    lines += ["", "## Columns", "", "| column | what |", "|---|---|"]
    lines += [f"| `{c}` | {COLUMN_DOCS.get(c, '')} |" for c in info.get("columns", COLUMNS[fmt])]
    lines += ["", *_lengths(info.get("lengths") or {}), *_templates(info.get("templates") or {})]
    lines += ["## Cost", "", f"{float(info.get('cost_usd', 0.0)):.4f} USD of teacher calls.", ""]
    if info.get("unpriced"):  # their calls count 0.0 above: say so rather than understate quietly
        lines += [f"Unpriced (counted as 0): {', '.join(sorted(info['unpriced']))}.", ""]
    if other := {k: v for k, v in info.items() if k not in _KNOWN}:
        lines += ["## Run settings", ""] + [f"- **{k}**: {_show(v)}" for k, v in other.items()] + [""]
    lines += ["## Command", "", "```", public_command(str(info.get("command", "(not recorded)"))), "```", ""]
    lines += _use(info)
    lines += ["## License", "", f"`{header['license']}`" + ("" if info.get("license") else
              ": not set by the run (`--license`); the traces' own terms apply."), ""]
    return scrub("\n".join(lines))


def confidence_lines(confidence: Mapping[str, Mapping[str, int]] | None) -> list[str]:
    """The card's confidence section: pairs by the tier that decided (`match`) and by `agreement`.

    >>> confidence_lines({"match": {"exact": 2, "intent": 1}, "agreement": {"1.00": 2, "0.67": 1}})[5]
    '| match | exact 2 · intent 1 |'
    """
    if not confidence:
        return []
    show = {key: " · ".join(f"{k} {v}" for k, v in confidence.get(key, {}).items()) or "none"
            for key in ("match", "agreement")}
    return ["", "## Confidence", "", "| pairs by | n |", "|---|---|", f"| match | {show['match']} |",
            f"| agreement | {show['agreement']} |", "",
            "`match`: the tier that decided the consensus (`exact`: teachers wrote the same canonical "
            "action; `intent`: the same intent, written differently). `agreement`: the share of the "
            "voting teachers in the winning group."]


def run_card_info(config: RunConfig, rows: list[dict[str, Any]], report: Report) -> dict[str, Any]:
    """`card_text`'s info for a `replay.run`: provenance, counts, lengths, templates, splits."""
    from replay.export.lengths import train_length
    from replay.export.pairs import confidence

    lengths = report.extra.get("lengths", {})
    dropped = report.extra.get("preflight_dropped_by_reason", {})
    return {
        "pairs": len(rows) if config.export.format == "dpo" else report.pairs, "rows": len(rows),
        "format": config.export.format, "sources": source_kinds(rows), "license": config.export.license,
        "student_models": sorted({r["student_model"] for r in rows if r.get("student_model")}),
        "teachers": sorted(report.extra.get("per_teacher", {})),
        "excluded_teachers": report.excluded_same_family,
        "method": config.consensus.method, "min_agreement": config.consensus.min_agreement,
        "match": config.consensus.match, "confidence": confidence(
            [r for r in rows if r.get("completion_from", "consensus") == "consensus"]),
        "counts": {"states": report.states, "all_teachers_excluded": report.states_all_teachers_excluded,
                   "failed": report.states_failed, "abstained": report.consensus["abstained"],
                   "agree": report.agree,
                   "pairs": report.pairs, "preflight_dropped": report.preflight_dropped,
                   **{f"{config.export.format}: {key}": n for key, n in report.extra.get("format", {}).items()
                      if key in ("desirable", "undesirable", "agree_failed")},
                   **{f"dropped: {reason}": n for reason, n in dropped.items()}},
        "cost_usd": report.cost_usd, "unpriced": report.extra.get("unpriced", {}), "command": config.command,
        "hindsight": report.hindsight,
        "lengths": lengths, "max_length": train_length(lengths, config.export.max_length),
        "templates": report.extra.get("preflight_templates", {}), "splits": report.extra.get("splits"),
        "redaction": (f"on: {sum(report.redactions.values())} secrets replaced by [REDACTED:<rule>:<tag>] "
                      "in prompts, answers and every file (gitleaks rules + configs/redact.toml)"
                      if config.redact else "OFF (--no-redact): prompts hold the sessions' raw text"),
        "pseudonymisation": _pseudonymisation(config, report),
        **({"filters": _filters(report)} if report.filtered or config.ingest.scope is not None else {}),
    }


def _pseudonymisation(config: RunConfig, report: Report) -> str:
    """The card's line on personal data (issue #50)."""
    if not config.pseudonymise:
        return "OFF (--no-pseudonymise): user names, e-mail addresses and other personal data are as recorded"
    counts = ", ".join(f"{kind} {n}" for kind, n in report.pseudonymised.items()) or "none found"
    return ("on: user names of home paths (and as words), e-mail addresses and the names written before "
            "them, machine names, public IP addresses and phone numbers replaced by stable placeholders "
            "(`user-<tag>`, `email-<tag>@example.com`, `person-<tag>`, `host-<tag>`, `ip-<tag>`, "
            "`phone-<tag>`; the same value, the same "
            f"placeholder) in prompts, answers and every file; distinct values per trace: {counts}. "
            f"Names in prose: {report.extra.get('names_in_prose', 'not looked for')}")


def _filters(report: Report) -> str:
    """What --project / --exclude-project / --since / --until left out (the globs are not shown: they
    name the user's projects)."""
    left = ", ".join(f"{name} {n}" for name, n in report.filtered.items()) or "nothing"
    return f"states left out before anything was sent: {left}"


def source_kinds(rows: list[dict[str, Any]]) -> list[str]:
    """What the pairs come from, naming no local path: source kinds and trace counts.

    >>> source_kinds([{"source": "claude_code", "trace_id": t} for t in ("t1", "t2")])
    ['Claude Code sessions (2 traces)']
    """
    kinds: dict[str, set[str]] = {}
    for row in rows:
        kinds.setdefault(row["source"], set()).add(row["trace_id"])
    names = {"claude_code": "Claude Code sessions", "swebench_rollout": "SWE-bench rollouts",
             "codex": "Codex CLI sessions", "gemini": "Gemini CLI sessions",
             "copilot": "Copilot CLI sessions", "mini_swe_agent": "mini-swe-agent trajectories",
             "swe_agent": "SWE-agent trajectories", "openhands": "OpenHands histories",
             "atif": "Harbor ATIF trajectories", "trajectory_dataset": "trajectory datasets",
             "agl_spans": "agent-lightning span streams", "agl_gateway": "agent-lightning Gateway rollouts"}
    return [f"{names.get(kind, kind)} ({len(traces)} traces)" for kind, traces in sorted(kinds.items())]
