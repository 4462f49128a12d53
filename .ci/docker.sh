#!/usr/bin/env bash
# Make a docker engine available for `pytest -m docker`: install docker.io + debootstrap from Debian's
# packages when missing, start dockerd when it is not answering, and wait until `docker info` works.
# Idempotent: a second call with the engine up does nothing.
set -euo pipefail

log=${DOCKERD_LOG:-/tmp/dockerd.log}

if docker info >/dev/null 2>&1; then
    command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap; }
    exit 0
fi

if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends docker.io debootstrap >/dev/null
fi

# There is no init system here, so dockerd runs as a plain background process. `--init` gives every
# container tini as PID 1: a PID 1 that ignores SIGTERM makes each `docker stop` wait its full 10-15 s,
# and the swebench harness stops every container it runs.
if ! { command -v pgrep >/dev/null && pgrep -x dockerd >/dev/null; }; then
    rm -f /var/run/docker.pid      # left by a dockerd that died; a new one refuses to start beside it
    nohup dockerd --init >"$log" 2>&1 &
fi

for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && exit 0
    sleep 1
done
echo "dockerd did not come up within 60 s; see $log" >&2
tail -n 20 "$log" >&2
exit 1
