"""Issue 25: the container image (deploy/container/Containerfile) for real.
Its runtime stage is packed from this build's binaries
(deploy/container/prebuilt.sh: the full in-image build, `make image`,
downloads the torch wheel and compiles for most of an hour on 2 cores, past
CI's budget; docs/build.md) and run with podman as the build machines run it
(runc, a debootstrap'd base cached machine-wide), overlay
storage where the kernel mounts it (else vfs), in a store of the test's own
that goes with it: a failed or killed run leaves no gigabytes behind. A tiny Qwen3 is mounted read-only,
auth is on (a mounted secret file, then the environment); the container's
Decide equals the host-built daemon's on the same checkpoint, configuration
and request; the daemon runs as uid 10001 and cannot write the model; a
promoted bundle is served by a new container on the same volume; SIGTERM
drains and the container exits 0; the image's HEALTHCHECK says healthy."""
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import grpc
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from make_tiny_qwen3 import make  # noqa: E402

from conftest import DAEMON, Daemon, dpb, decisions_pb2_grpc, health_pb2, health_pb2_grpc  # noqa: E402
from mesa.anyjev.v1 import bundles_pb2 as bpb, bundles_pb2_grpc  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CONTAINER = ROOT / "deploy" / "container"
PODMAN = str(CONTAINER / "podman.sh")
TAG = f"localhost/mesa-anyjevd-e2e:{uuid.uuid4().hex[:8]}"
TOKEN = "container-t0ken-5e1f"
AUTH = [("authorization", f"Bearer {TOKEN}")]
LOCK = "0190586d" * 8
MODEL = "tiny/qwen3"
TOPICS = ["genes", "proteins", "cells", "viruses"]
QUESTION = dpb.Question(id="topic", kind="choice", text=b"What is it about?",
                        options=[t.encode() for t in TOPICS])
TEXTS = [f"Item {i}: a dataset about {TOPICS[i % 4]}" for i in range(16)]
# One configuration for both daemons on top of the image's file: the CPU, a
# deterministic path (no timed GEMM choice, one thread) and a small pool.
SETTINGS = {"MODEL__NAME": MODEL, "MODEL__DEVICE": "cpu", "MODEL__DTYPE": "float32",
            "MODEL__ATTENTION": "eager", "MODEL__CPU_GEMM": "aten", "MODEL__THREADS": "1",
            "ENGINE__KV_POOL_BYTES": str(64 << 20), "ENGINE__HOST_CACHE_BYTES": "0",
            "ENGINE__MEMORY_RESERVE_BYTES": str(256 << 20)}
ENV = {f"MESA_ANYJEV_{k}": v for k, v in SETTINGS.items()}
# Bounds for failures only, sized for a loaded 2-core host: the image build
# (debootstrap on a cold cache, then 3.4 GB of torch and CUDA libraries
# committed) and a container's start.
BUILD_TIMEOUT = 1500
# An image already built (make test-image: make image's), tested instead of
# one packed from this build's binaries.
BUILT = os.environ.get("MESA_ANYJEV_E2E_IMAGE", "")
START_TIMEOUT = 180


def podman(*args, timeout=300, check=True, env=None):
    r = subprocess.run([PODMAN, *args], capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, **(env or {})})
    if check and r.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)}: exit {r.returncode}: {r.stderr[-3000:]}")
    return r


def poll(probe, what, timeout, alive=lambda: True):
    """Waits on an event (a health status, a log line, a state): `timeout`
    only bounds a failure."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found is not None:
            return found
        if not alive() or time.monotonic() > deadline:
            raise AssertionError(f"never saw {what}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """podman's store for this test alone (MESA_ANYJEV_PODMAN_ROOT, read by
    deploy/container/podman.sh): the base is imported from the machine-wide
    tar cache in seconds, and the image, its containers and the volume go
    with the folder at the end, whatever happened."""
    if os.geteuid() != 0:
        pytest.skip("needs root: rootful podman as docs/build.md runs it")
    if subprocess.run(["bash", "-c", "command -v podman debootstrap"],
                      capture_output=True).returncode != 0:
        pytest.fail("podman or debootstrap is missing: run scripts/install.sh")
    root = tmp_path_factory.mktemp("podman")
    os.environ["MESA_ANYJEV_PODMAN_ROOT"] = str(root)
    yield root
    # Not `system reset`: it also removes the machine's podman networks.
    podman("rm", "--all", "--force", "--volumes", check=False)
    podman("volume", "rm", "--all", "--force", check=False)
    podman("rmi", "--all", "--force", check=False)
    del os.environ["MESA_ANYJEV_PODMAN_ROOT"]
    subprocess.run(["rm", "-rf", str(root)], check=False)


@pytest.fixture(scope="module")
def building(store, tmp_path_factory):
    """Starts the image build (minutes) at once, so the host daemon's part
    runs meanwhile; yields a function that waits for it."""
    log = tmp_path_factory.mktemp("image") / "build.log"
    build_dir = Path(DAEMON).resolve().parents[1]
    # As make image-prebuilt: the runtime stage alone, this build's binaries
    # copied from a folder, one commit (--layers=false).
    script = f"bash {CONTAINER}/prebuilt.sh {build_dir} {TAG} bookworm"
    if BUILT:
        # `make test-image`: the image `make image` built, compiled inside
        # its build stage, copied from the machine's store into the test's
        # (docker's archive: OCI's has no HEALTHCHECK).
        script = (f"env -u MESA_ANYJEV_PODMAN_ROOT {PODMAN} save --format docker-archive "
                  f"-o {log.parent}/image.tar {BUILT} && {PODMAN} load -i {log.parent}/image.tar"
                  f" && {PODMAN} tag {BUILT} {TAG} && rm {log.parent}/image.tar")
    started = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(["bash", "-c", script], stdout=out, stderr=subprocess.STDOUT)

    def wait():
        if proc.returncode is None:
            rc = proc.wait(timeout=BUILD_TIMEOUT)
            print(f"image built in {time.monotonic() - started:.0f} s")
            assert rc == 0, log.read_text()[-5000:]
        return TAG

    yield wait
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = make(tmp_path_factory.mktemp("ckpt") / "tiny-qwen3")
    # Read by the image's user (10001) through a read-only mount.
    for f in [path, *path.iterdir()]:
        f.chmod(0o755 if f.is_dir() else 0o644)
    return path


def decide(stub, level, metadata=None, texts=TEXTS[:4]):
    return stub.Decide(dpb.DecideRequest(states=[dpb.State(text=t.encode()) for t in texts],
                                         questions=[QUESTION], level=level),
                       timeout=120, metadata=metadata)


@pytest.fixture(scope="module")
def host(building, checkpoint, tmp_path_factory):
    """The host-built daemon on the image's configuration file with the same
    settings: its answer to the compared call (its first, as in the
    container) and an L1 calibration fit on it, for the bundle."""
    tmp = tmp_path_factory.mktemp("host")
    daemon = Daemon(tmp, args=("--config", str(CONTAINER / "mesa-anyjevd.yaml"),
                               "--model", str(checkpoint), "--set", "auth.token_file=",
                               "--set", f"decisions.bundles_dir={tmp / 'bundles'}"),
                    env=ENV, start_timeout=START_TIMEOUT)
    try:
        reference = decide(daemon.decisions, "L0")
        fit = daemon.decisions.Fit(dpb.FitRequest(
            question=QUESTION, states=[dpb.State(text=t.encode()) for t in TEXTS],
            labels=[i % 4 for i in range(len(TEXTS))], level="L1"), timeout=300)
        exported = json.loads(daemon.decisions.ExportArtifacts(
            dpb.ExportArtifactsRequest(), timeout=30).artifacts_json)
    finally:
        daemon.stop()
    return reference, fit.question_key, exported["artifacts"]


class Container:
    """One container of the image: the daemon on its default ports inside,
    published on free loopback ports, the model and a token file mounted
    read-only, the bundle store on a named volume."""

    def __init__(self, image, checkpoint, volume, token_file=None, env=None, secret_env=None):
        self.name = f"mesa-anyjev-e2e-{uuid.uuid4().hex[:8]}"
        args = ["run", "--detach", "--name", self.name,
                "-p", "127.0.0.1::50151", "-p", "127.0.0.1::9464",
                "-v", f"{checkpoint}:/models/tiny-qwen3:ro",
                "-v", f"{volume}:/var/lib/mesa-anyjev/bundles",
                "-e", "MESA_ANYJEV_MODEL__PATH=/models/tiny-qwen3"]
        if token_file:
            args += ["-v", f"{token_file}:/run/secrets/mesa-anyjevd-token:ro"]
        for k, v in {**ENV, **(env or {})}.items():
            args += ["-e", f"{k}={v}"]
        # A secret passes by name (-e NAME): its value stays off command lines.
        for k in secret_env or {}:
            args += ["-e", k]
        podman(*args, image, env=secret_env)
        port = podman("port", self.name, "50151/tcp").stdout.strip().splitlines()[0]
        self.address = port.replace("0.0.0.0", "127.0.0.1")
        self.channel = grpc.insecure_channel(self.address)
        self.decisions = decisions_pb2_grpc.DecisionsStub(self.channel)
        self.bundles = bundles_pb2_grpc.BundlesStub(self.channel)
        self.health = health_pb2_grpc.HealthStub(self.channel)
        self.wait_serving()

    def state(self):
        return json.loads(podman("inspect", self.name).stdout)[0]["State"]

    def running(self):
        return self.state()["Status"] == "running"

    def logs(self):
        r = podman("logs", self.name, check=False)
        return r.stdout + r.stderr

    def wait_serving(self):
        def serving():
            try:
                reply = self.health.Check(health_pb2.HealthCheckRequest(), timeout=5)
                return True if reply.status == health_pb2.HealthCheckResponse.SERVING else None
            except grpc.RpcError:
                return None
        try:
            poll(serving, "health SERVING", START_TIMEOUT, alive=self.running)
        except AssertionError as e:
            raise AssertionError(f"{e}: {self.state()}\n{self.logs()}") from None

    def sigterm(self):
        """`podman stop`: the image's STOPSIGNAL (SIGTERM) to tini, which
        passes it to the daemon; the exit status is the daemon's."""
        podman("stop", "--time", "90", self.name, timeout=180)
        self.channel.close()
        return self.state()["ExitCode"]

    def remove(self):
        self.channel.close()
        podman("rm", "--force", "--volumes", self.name, check=False)


@pytest.fixture(scope="module")
def volume(store):
    name = f"mesa-anyjev-e2e-bundles-{uuid.uuid4().hex[:8]}"
    podman("volume", "create", name)
    yield name
    podman("volume", "rm", "--force", name, check=False)


def level_now(container):
    reply = container.decisions.Decide(dpb.DecideRequest(
        states=[dpb.State(text=b"About cells")], questions=[QUESTION], level="auto"),
        timeout=60, metadata=AUTH)
    return reply.decisions[0].level


def test_the_image_serves_as_the_host_daemon_and_keeps_a_promoted_bundle(
        building, host, checkpoint, volume, tmp_path):
    reference, key, artifacts = host
    image = building()
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    os.chown(token_file, 10001, 10001)  # the image's user owns its secret

    first = Container(image, checkpoint, volume, token_file=token_file)
    try:
        # Auth is on: no token, no answer.
        with pytest.raises(grpc.RpcError) as refused:
            decide(first.decisions, "L0")
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        # Same binary, libraries, configuration and request: the same answer.
        got = decide(first.decisions, "L0", metadata=AUTH)
        assert [(d.level, list(d.probs)) for d in got.decisions] == \
            [(d.level, list(d.probs)) for d in reference.decisions]
        assert got.model == reference.model == MODEL

        # The daemon (under tini, PID 1) and everything else run as 10001.
        top = podman("top", first.name, "comm", "user").stdout.splitlines()[1:]
        users = dict(line.split() for line in top if line.strip())
        assert set(users) >= {"tini", "mesa-anyjevd"}, users
        assert set(users.values()) == {"mesa-anyjev"}, users
        assert podman("exec", first.name, "id", "-u").stdout.strip() == "10001"
        write = podman("exec", first.name, "touch", "/models/tiny-qwen3/x", check=False)
        assert write.returncode != 0 and "Read-only file system" in write.stderr, write
        # The image's HEALTHCHECK (mesa-anyjev health inside) says healthy.
        check = podman("healthcheck", "run", first.name, check=False)
        assert check.returncode == 0, check.stdout + check.stderr

        # A bundle put and promoted through the Bundles service.
        put = first.bundles.Put(bpb.PutBundleRequest(
            lock_sha=LOCK,
            artifacts_json=json.dumps({"model": MODEL, "artifacts": artifacts,
                                       "heads": {}}).encode(),
            manifest_json=json.dumps({
                "per_question": {"topic": {"key": key, "level": "L1"}},
                "validation": {"topic": {"loco": {"acc": 0.7, "ece": 0.1}}},
                "fitted_on": {"backend_kind": "hf", "served_model": MODEL}}).encode()),
            timeout=30, metadata=AUTH)
        assert put.version == 1
        assert level_now(first) == "L0"  # put is not promote
        first.bundles.Promote(bpb.PromoteBundleRequest(lock_sha=LOCK, version=1,
                                                       question_id="topic"),
                              timeout=30, metadata=AUTH)
        assert level_now(first) == "L1"

        # SIGTERM drains and the container exits 0, as outside a container.
        assert first.sigterm() == 0
        logs = first.logs()
        assert "draining" in logs and "drained" in logs, logs
        assert TOKEN not in logs
    finally:
        first.remove()

    # A new container on the same volume, its token from the environment:
    # the promoted bundle is served before SERVING.
    second = Container(image, checkpoint, volume,
                       env={"MESA_ANYJEV_AUTH__TOKEN_ENV": "MESA_ANYJEVD_TOKEN"},
                       secret_env={"MESA_ANYJEVD_TOKEN": TOKEN})
    try:
        assert level_now(second) == "L1"
        assert "serving 1 question(s)" in second.logs()
        assert second.sigterm() == 0
    finally:
        second.remove()
