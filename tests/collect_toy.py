"""A toy SWE-bench instance for the collect tests: its image (built offline, cached) and scripted students.

The image is what swebench>=5 grades on: /testbed is a git repo at the base commit, and the instance
row carries its own `eval_script` (applies the test patch, runs pytest between the harness's markers)
and `log_parser` ("parse_log_pytest", swebench's parser for `pytest -rA` output).

Building needs root, debootstrap and a docker engine (`.ci/docker.sh`), and only Debian's package
mirror: `debootstrap --variant=minbase` + python3, pytest, git → `docker import` → the base image;
then `docker build --network none` adds the repo. Both are reused while they exist; the instance image
tag is a hash of the repo, so editing the toy repo rebuilds it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from collect.instances import image_name
from tests.llm_server import Reply, chat_completion

NAMESPACE = "teacher-replay-test"
PACKAGES = "python3,python3-pytest,git"
BASE_IMAGE = f"{NAMESPACE}/bookworm-minbase:{hashlib.sha256(PACKAGES.encode()).hexdigest()[:10]}"
MIRROR = os.environ.get("REPLAY_DEBIAN_MIRROR", "http://deb.debian.org/debian")
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

REPO = {
    "calc.py": "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n",
    "tests/test_calc.py": "from calc import sub\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n",
    ".gitignore": "__pycache__/\n.pytest_cache/\n",
}
TEST_PATCH = "\n".join([
    "diff --git a/tests/test_calc.py b/tests/test_calc.py",
    "--- a/tests/test_calc.py",
    "+++ b/tests/test_calc.py",
    "@@ -1,5 +1,9 @@",
    "-from calc import sub",
    "+from calc import add, sub",
    " ",                                   # context lines of an empty line are one space
    " ",
    " def test_sub():",
    "     assert sub(5, 3) == 2",
    "+",
    "+",
    "+def test_add():",
    "+    assert add(2, 3) == 5",
    "",
])
EVAL_SCRIPT = f"""#!/bin/bash
set -uxo pipefail
cd /testbed
git checkout HEAD -- tests/test_calc.py
git apply -v - <<'EOF_114329324912'
{TEST_PATCH}EOF_114329324912
: '>>>>> Start Test Output'
python3 -m pytest -rA -p no:cacheprovider tests/test_calc.py
: '>>>>> End Test Output'
git checkout HEAD -- tests/test_calc.py
"""
DOCKERFILE = f"""FROM {BASE_IMAGE}
ENV {PATH_ENV} LANG=C.UTF-8
COPY repo /testbed
WORKDIR /testbed
RUN git init -q && git add -A \\
 && git -c user.name=toy -c user.email=toy@example.invalid commit -qm base
"""
IMAGE_TAG = hashlib.sha256(json.dumps([REPO, DOCKERFILE], sort_keys=True).encode()).hexdigest()[:10]
# As SWE-bench's eval images once were (SWE-bench #465): the fix is in the repository, past HEAD, on a
# branch, a tag, a remote ref, a stash, the reflog, and ORIG_HEAD. Fixed dates: the fix's hash is stable.
FIXED_CALC = REPO["calc.py"].replace("def add(a, b):\n    return a - b", "def add(a, b):\n    return a + b")
FUTURE_DOCKERFILE = DOCKERFILE + """COPY fixed.py /tmp/fixed.py
RUN export GIT_AUTHOR_DATE=2025-02-01T00:00:00Z GIT_COMMITTER_DATE=2025-02-01T00:00:00Z \\
 && git config user.name toy && git config user.email toy@example.invalid \\
 && git checkout -qb future && cp /tmp/fixed.py calc.py && git commit -qam "fix add: the answer key" \\
 && git tag v-fix && git update-ref refs/remotes/origin/main HEAD \\
 && git remote add origin https://example.invalid/toy/calc.git \\
 && git checkout -q - && cp /tmp/fixed.py calc.py && git stash -q \\
 && git reset -q --hard future && git reset -q --hard HEAD~1 && rm /tmp/fixed.py
"""
FUTURE_TAG = "future-" + hashlib.sha256(json.dumps([REPO, FUTURE_DOCKERFILE]).encode()).hexdigest()[:10]


def toy_instance(instance_id: str, script: str) -> dict[str, Any]:
    """A SWE-bench row; the scripted student reads which script to play from the problem statement."""
    return {
        "repo": "toy/calc", "instance_id": instance_id, "base_commit": "HEAD", "version": "1.0",
        "problem_statement": f"add(2, 3) returns -1 instead of 5.\n[script: {script}]",
        "hints_text": "", "created_at": "2025-01-01T00:00:00Z", "environment_setup_commit": "HEAD",
        "patch": "", "test_patch": TEST_PATCH,
        "FAIL_TO_PASS": json.dumps(["tests/test_calc.py::test_add"]),
        "PASS_TO_PASS": json.dumps(["tests/test_calc.py::test_sub"]),
        "eval_script": EVAL_SCRIPT, "log_parser": "parse_log_pytest", "eval_type": "pass_and_fail",
    }


def _exists(client: Any, image: str) -> bool:
    import docker

    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        return False
    return True


def ensure_base_image(client: Any) -> str:
    if _exists(client, BASE_IMAGE):
        return BASE_IMAGE
    if shutil.which("debootstrap") is None:
        raise RuntimeError("debootstrap is not installed: run .ci/docker.sh")
    root = Path(tempfile.mkdtemp(prefix="toy-rootfs-", dir="/var/tmp"))
    try:
        subprocess.run(["debootstrap", "--variant=minbase", f"--include={PACKAGES}", "bookworm", str(root),
                        MIRROR], check=True, capture_output=True)
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(root / cache, ignore_errors=True)
        subprocess.run(f"tar -C {root} -c . | docker import -c 'ENV {PATH_ENV}' - {BASE_IMAGE}",
                       shell=True, check=True, capture_output=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return BASE_IMAGE


def ensure_instance_images(client: Any, instance_ids: list[str], future: bool = False) -> str:
    """Build the toy image once and tag it for each instance id; returns the tag to pass as --image-tag.

    `future`: the image whose repository also holds the fix past HEAD (FUTURE_DOCKERFILE).
    """
    image_tag = FUTURE_TAG if future else IMAGE_TAG
    first = image_name(instance_ids[0], NAMESPACE, image_tag)
    if not _exists(client, first):
        ensure_base_image(client)
        with tempfile.TemporaryDirectory() as context:
            for name, text in REPO.items():
                path = Path(context, "repo", name)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
            Path(context, "fixed.py").write_text(FIXED_CALC)
            Path(context, "Dockerfile").write_text(FUTURE_DOCKERFILE if future else DOCKERFILE)
            client.images.build(path=context, tag=first, network_mode="none", rm=True, forcerm=True)
    image = client.images.get(first)
    for instance_id in instance_ids[1:]:
        repository, tag = image_name(instance_id, NAMESPACE, image_tag).rsplit(":", 1)
        image.tag(repository, tag)
    return image_tag


# --- scripted students -------------------------------------------------------------------------------

FIX = [
    [{"name": "bash", "arguments": {"command": "cat calc.py"}}],
    [{"name": "edit", "arguments": {"command": "str_replace", "path": "calc.py",
                                    "old_str": "def add(a, b):\n    return a - b",
                                    "new_str": "def add(a, b):\n    return a + b"}}],
    [{"name": "bash", "arguments": {"command": "python3 -c 'from calc import add; print(add(2, 3))'"}}],
    "add() subtracted; it adds now.",
]
NOFIX = [
    [{"name": "bash", "arguments": {"command": "ls"}}],
    [{"name": "edit", "arguments": {"command": "create", "path": "NOTES.md", "file_text": "add is fine\n"}}],
    "Nothing to fix.",
]
SLEEPY = [[{"name": "bash", "arguments": {"command": "sleep 300"}}], "done"]
SLOW = [[{"name": "bash", "arguments": {"command": "echo start; sleep 60; echo never"}}], "done"]
SCRIPTS = {"fix": FIX, "nofix": NOFIX, "sleepy": SLEEPY, "slow": SLOW}


def vllm_body(step: str | list[dict[str, Any]], turn: int, with_tokens: bool = True) -> dict[str, Any]:
    """A vLLM-style chat.completion: prompt_token_ids at the top, token_ids and logprobs in the choice."""
    content, calls = (step, None) if isinstance(step, str) else ("", step)
    if calls:
        calls = [{**call, "id": f"call_{turn}_{index}"} for index, call in enumerate(calls)]
    if not with_tokens:
        return chat_completion(content, calls, model="student")
    ids = [1000 + 10 * turn + i for i in range(3 + turn)]
    logprobs = {"content": [{"token": f"<{i}>", "logprob": -0.125 * (k + 1), "bytes": list(f"<{i}>".encode()),
                             "top_logprobs": []} for k, i in enumerate(ids)]}
    return chat_completion(content, calls, model="student", prompt_token_ids=list(range(1, 21 + turn)),
                           choice_extra={"token_ids": ids, "logprobs": logprobs})


def scripted_student(request: dict[str, Any]) -> Reply:
    """Plays the script named in the problem statement; the turn is the number of assistant messages."""
    messages = request.get("messages") or []
    prompt = messages[1]["content"] if len(messages) > 1 else ""
    name = next((key for key in SCRIPTS if f"[script: {key}]" in prompt), "nofix")
    turn = sum(message.get("role") == "assistant" for message in messages)
    script = SCRIPTS[name]
    step = script[turn] if turn < len(script) else "done"
    return Reply(vllm_body(step, turn, with_tokens=bool(request.get("return_token_ids"))))


# --- the same students as a vLLM model (tests/vllm_server.py): raw text, reasoning first -------------

REREAD = [[{"name": "bash", "arguments": {"command": f"cat calc.py # {n}"}}] for n in range(40)]
OVERFLOW = [*FIX[:3], *REREAD, "done"]      # the fix, then reading on until the context is full
GARBLED = [  # a call the server's parser cannot read (bad JSON / no `<function=` header), then the fix
    '<tool_call>\n{"name": "bash", "arguments": {"command": "cat calc.py"}\n</tool_call>', *FIX]
GARBLED_XML = ["<tool_call>\n<function bash>\n<parameter=command>\ncat calc.py\n</parameter>\n</function>\n"
               "</tool_call>", *FIX]
VLLM_SCRIPTS = {**SCRIPTS, "overflow": OVERFLOW, "garbled": GARBLED, "garbled_xml": GARBLED_XML}
READY = [{"name": "bash", "arguments": {"command": "echo ready"}}]


def toy_policy(fmt: str = "hermes", reasoning: bool = True,
               scripts: dict[str, list[Any]] | None = None) -> Any:
    """The scripted student as the model behind tests/vllm_server.py: each step as the text it generates.

    The start-up probe ("connectivity check") gets a bash call; a rollout plays the script named in its
    problem statement, one step per assistant message so far, thinking a line first (`reasoning`).
    """
    from tests.vllm_server import assistant_text

    scripts = scripts or VLLM_SCRIPTS

    def policy(request: dict[str, Any]) -> str:
        messages = request.get("messages") or []
        text = json.dumps(messages[:2])
        if "connectivity check" in text:
            return assistant_text("", READY, fmt=fmt)  # type: ignore[arg-type]
        name = next((key for key in scripts if f"[script: {key}]" in text), "nofix")
        turn = sum(message.get("role") == "assistant" for message in messages)
        step = scripts[name][turn] if turn < len(scripts[name]) else "done"
        think = f"Turn {turn}: what next?" if reasoning else None
        if isinstance(step, str):
            return step if step.startswith("<tool_call>") else assistant_text(step, reasoning=think,
                                                                              fmt=fmt)  # type: ignore[arg-type]
        return assistant_text("", step, reasoning=think, fmt=fmt)  # type: ignore[arg-type]

    return policy
