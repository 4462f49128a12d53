"""An exec's output read whole by collect.runtime's docker client, however late the client reads it
(`-m docker`, issue #47: a verification branch's `grep` came back empty with exit code 0 under load).

A client that reads the exec's response late (as on a loaded machine) finds the command's output already
in the socket with the response's headers; docker-py's own reader then lost it. Here the lateness is made
certain: the HTTP client waits before reading each response.
"""

from __future__ import annotations

import http.client
import time
from typing import Any

import pytest

from collect.config import CollectConfig
from collect.runtime import ContainerTracker, Runtime, docker_client
from tests.collect_toy import ensure_instance_images
from tests.test_verify_docker import CASES

pytestmark = pytest.mark.docker
GREP = "grep -rn 'a - b' --include=*.py ."
FOUND = "./calc.py:2:    return a - b\n./calc.py:6:    return a - b\n"


@pytest.fixture
def late_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    begin = http.client.HTTPResponse.begin

    def late(self: http.client.HTTPResponse) -> None:
        time.sleep(0.3)                    # the command has answered by now
        begin(self)

    monkeypatch.setattr(http.client.HTTPResponse, "begin", late)


def test_a_command_that_answers_before_the_client_reads_keeps_its_output(client: Any,
                                                                         late_reader: None) -> None:
    from collect.instances import image_name
    from tests.collect_toy import NAMESPACE

    instance_id = next(iter(CASES))
    image = image_name(instance_id, NAMESPACE, ensure_instance_images(client, [instance_id]))
    config = CollectConfig(instances="-", out="-", student_url="http://127.0.0.1:9/v1", student_model="m")
    runtime = Runtime(docker_client(config), config, ContainerTracker())
    with runtime.start(image, "exec-output", instance_id) as rt:
        found = rt.run(GREP)
        assert (found.output, found.exit_code) == (FOUND, 0)
        rt.write_file("calc.py", FOUND.encode())
        assert "+./calc.py:2:    return a - b" in rt.diff()
        container = rt.container               # the harness execs through the same client
        assert container.exec_run(["cat", "calc.py"], workdir="/testbed").output == FOUND.encode()
