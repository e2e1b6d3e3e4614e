"""End-to-end fixtures: the real mesa-anyjevd binary on a free loopback port,
the real mesa-anyjev CLI, and a Python grpcio client generated from our
proto at session start (an independent client, not our C++ one)."""
import atexit
import collections
import json
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import grpc
import pytest

DAEMON = os.environ.get("MESA_ANYJEVD", "build/server/mesa-anyjevd")
CLI = os.environ.get("MESA_ANYJEV_CLI", "build/client/mesa-anyjev")
PROTO_DIR = os.environ.get("MESA_ANYJEV_PROTO_DIR", "proto")


def _generate_stubs():
    from grpc_tools import protoc
    import grpc_tools

    out = tempfile.mkdtemp(prefix="mesa-anyjev-stubs-")
    include = str(Path(grpc_tools.__file__).parent / "_proto")
    protos = [str(p.relative_to(PROTO_DIR)) for p in (Path(PROTO_DIR) / "mesa").rglob("*.proto")]
    rc = protoc.main(["protoc", f"-I{PROTO_DIR}", f"-I{include}",
                      f"--python_out={out}", f"--grpc_python_out={out}", *protos])
    assert rc == 0, "protoc failed on our proto files"
    sys.path.insert(0, out)


_generate_stubs()
from mesa.anyjev.v1 import decisions_pb2, decisions_pb2_grpc  # noqa: E402
from mesa.anyjev.v1 import inference_pb2, inference_pb2_grpc  # noqa: E402
from grpc_health.v1 import health_pb2, health_pb2_grpc  # noqa: E402

pb = inference_pb2
dpb = decisions_pb2


# With MESA_ANYJEV_ERROR_LOG=FILE, every call that fails is appended to FILE
# (JSON lines: test, method, code, message); scripts/bad_inputs_table.py
# turns them into docs/reliability.md's table of bad inputs and their codes.
ERROR_LOG = os.environ.get("MESA_ANYJEV_ERROR_LOG")


class _RecordErrors(grpc.UnaryUnaryClientInterceptor):
    def intercept_unary_unary(self, continuation, details, request):
        test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
        outcome = continuation(details, request)

        def record(call):
            code = call.code()
            if code != grpc.StatusCode.OK:
                with open(ERROR_LOG, "a") as log:
                    log.write(json.dumps({"test": test, "method": details.method,
                                          "code": code.name, "message": call.details()}) + "\n")

        outcome.add_done_callback(record)
        return outcome


class Daemon:
    """One mesa-anyjevd process: started with port 0, port read back from
    --port-file, stderr kept for assertions. `binary`: another build's
    daemon (the aarch64 one under qemu, `wrapper`) instead of MESA_ANYJEVD.
    `listen`: a fixed address (a daemon restarted where the last one was)."""

    def __init__(self, tmp: Path, args=(), env=None, wait_serving=True, wrapper=(),
                 start_timeout=30.0, binary=None, listen="127.0.0.1:0"):
        self.tmp = tmp
        self.port_file = tmp / "port"
        self.metrics_port_file = tmp / "metrics-port"
        self.log_path = tmp / "daemon.log"
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("MESA_ANYJEV_")}
        # decisions.bundles_dir defaults to the state directory: each daemon
        # gets its own, never the user's (or another test's).
        full_env.pop("STATE_DIRECTORY", None)
        full_env["XDG_STATE_HOME"] = str(tmp / "state")
        full_env.update(env or {})
        model = [] if "--model" in args else ["--model", "fake"]
        cmd = [*wrapper, binary or DAEMON, *model, "--listen", listen,
               "--port-file", str(self.port_file),
               "--metrics-listen", "127.0.0.1:0",
               "--set", f"server.metrics_port_file={self.metrics_port_file}", *args]
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=full_env)
        self.port = self._read_port(self.port_file, start_timeout)
        self.metrics_port = self._read_port(self.metrics_port_file, start_timeout)
        self.address = f"127.0.0.1:{self.port}"
        self.channel = grpc.insecure_channel(self.address)
        calls = self.channel
        if ERROR_LOG:
            calls = grpc.intercept_channel(self.channel, _RecordErrors())
        self.stub = inference_pb2_grpc.InferenceStub(calls)
        self.decisions = decisions_pb2_grpc.DecisionsStub(calls)
        self.health = health_pb2_grpc.HealthStub(calls)
        if wait_serving:
            self.wait_for("SERVING", start_timeout)

    def poll(self, probe, what, timeout):
        """Polls `probe` until it returns something other than None and
        returns that: waiting on an event the daemon shows (a file, a
        health status, a metric, a log line). `timeout` only bounds a
        failure; the daemon exiting ends the wait at once."""
        deadline = time.monotonic() + timeout
        while True:
            found = probe()
            if found is not None:
                return found
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited {self.proc.returncode} before {what}: "
                                     f"{self.output()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"never saw {what}: {self.output()}")
            time.sleep(0.02)

    def _read_port(self, path: Path, timeout=30.0) -> int:
        def port():
            text = path.read_text().strip() if path.exists() else ""
            return int(text) if text else None
        return self.poll(port, f"a port in {path}", timeout)

    def health_status(self, service=""):
        reply = self.health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
        return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)

    def wait_for(self, status, timeout=30.0):
        def reached():
            try:
                return True if self.health_status() == status else None
            except grpc.RpcError:
                return None
        self.poll(reached, f"health {status}", timeout)

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            return r.read().decode()

    def wait_metrics(self, condition, what, timeout=60.0) -> str:
        """Waits until a scrape satisfies `condition` (a count or a gauge
        reaching a value) and returns that scrape."""
        def scrape():
            text = self.metrics()
            return text if condition(text) else None
        return self.poll(scrape, what, timeout)

    def wait_log(self, needle, timeout=60.0):
        """Waits for `needle` in the daemon's log (found even if the daemon
        has exited since it logged it)."""
        self.poll(lambda: True if needle in self.output() else None, f"log {needle!r}", timeout)

    def signal(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)

    def wait(self, timeout=60.0) -> int:
        return self.proc.wait(timeout=timeout)

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.channel.close()
        self.log.close()


@pytest.fixture
def start_daemon(tmp_path):
    started = []

    def start(*args, env=None, wait_serving=True, name=None, **options):
        d = tmp_path / (name or f"d{len(started)}")
        d.mkdir()
        daemon = Daemon(d, args=args, env=env, wait_serving=wait_serving, **options)
        started.append(daemon)
        return daemon

    yield start
    for daemon in started:
        daemon.stop()


@pytest.fixture
def daemon(start_daemon):
    return start_daemon()


_CLIENT_LIB = []


def client_package():
    """The Python client (clients/python) built as pip builds it (setup.py's
    build_py generates its gRPC modules from proto/) into a temporary folder,
    put on sys.path once per process and imported: tests drive the daemon
    through it in-process. tests/e2e/test_python_client.py installs it into a
    fresh venv instead."""
    if not _CLIENT_LIB:
        root = Path(__file__).resolve().parents[2]
        work = Path(tempfile.mkdtemp(prefix="mesa-anyjev-client-"))
        atexit.register(shutil.rmtree, work, ignore_errors=True)
        skip = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
        source = work / "clients" / "python"
        shutil.copytree(root / "clients" / "python", source, ignore=skip)
        shutil.copytree(root / "proto", work / "proto")
        built = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib",
                                str(work / "lib")], cwd=source, capture_output=True, text=True,
                               timeout=300)
        assert built.returncode == 0, built.stdout + built.stderr
        sys.path.insert(0, str(work / "lib"))
        _CLIENT_LIB.append(work / "lib")
    import mesa_anyjev_client
    return mesa_anyjev_client


# The CLI's stores default under ~ (artifacts.dir, labels.dir): the tests
# of this process share a home of their own, never the user's.
CLI_HOME = tempfile.mkdtemp(prefix="mesa-anyjev-cli-home-")
atexit.register(shutil.rmtree, CLI_HOME, ignore_errors=True)


def run_cli(*args, env=None, timeout=60, cwd=None, input=None):
    full_env = {k: v for k, v in os.environ.items()
                if not k.startswith(("MESA_ANYJEV_", "MESA_LLM_"))}
    full_env["HOME"] = CLI_HOME
    full_env.update(env or {})
    return subprocess.run([str(Path(CLI).resolve()), *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout, cwd=cwd, input=input)


def add_token(file, tenant, *flags):
    """A token from the real CLI (`mesa-anyjev tokens add`); the file gets
    its digest only."""
    done = run_cli("tokens", "add", "--tenant", tenant, "--file", str(file), *flags)
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{64}", token), done.stdout
    assert token not in file.read_text()
    return token


def auth(token):
    """Call metadata carrying `token`."""
    return [("authorization", f"Bearer {token}")]


class _Details(collections.namedtuple(
        "_Details", ("method", "timeout", "metadata", "credentials", "wait_for_ready",
                     "compression")), grpc.ClientCallDetails):
    pass


class _Token(grpc.UnaryUnaryClientInterceptor):
    """Sends a tenant's bearer token with every call."""

    def __init__(self, token):
        self.token = token

    def intercept_unary_unary(self, continuation, details, request):
        metadata = [*(details.metadata or []), ("authorization", f"Bearer {self.token}")]
        return continuation(_Details(details.method, details.timeout, metadata,
                                     details.credentials, details.wait_for_ready,
                                     details.compression), request)


def with_token(daemon, token):
    """The daemon's stubs, each call carrying `token`."""
    calls = grpc.intercept_channel(daemon.channel, _Token(token))
    daemon.calls = calls
    daemon.stub = inference_pb2_grpc.InferenceStub(calls)
    daemon.decisions = decisions_pb2_grpc.DecisionsStub(calls)


def run_on_a_tty(argv, env):
    """The CLI with stderr on a pseudo-terminal: what a person sees."""
    parent, child = pty.openpty()
    full = {**os.environ, **env, "HOME": env.get("HOME", CLI_HOME)}
    proc = subprocess.Popen([str(Path(CLI).resolve()), *argv], stdout=subprocess.PIPE,
                            stderr=child, env=full)
    os.close(child)
    screen = b""
    while True:
        ready, _, _ = select.select([parent], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(parent, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        screen += chunk
    out, _ = proc.communicate(timeout=300)
    os.close(parent)
    return proc.returncode, out.decode(), screen.decode(errors="replace")


def metric(text, name, **labels) -> float:
    """The sample of `name` with exactly these labels (in any order) in a
    Prometheus scrape; 0 when absent, as counters start at 0."""
    for m in re.finditer(rf"^{name}(?:\{{([^}}]*)\}})? (\S+)$", text, re.M):
        found = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))
        if found == {k: str(v) for k, v in labels.items()}:
            return float(m.group(2))
    return 0.0


def in_flight(calls):
    """A condition for wait_metrics: this many calls between arrival and
    status (the engine may run several of them in one pass)."""
    return lambda text: metric(text, "mesa_anyjev_inflight_requests") == calls


def started(calls):
    """A condition for wait_metrics: this many calls (the warm-up counts)
    have had their first work in a pass, so a call in flight is running,
    not waiting in the queue where a cancel or deadline skips it."""
    return lambda text: sum(
        metric(text, "mesa_anyjev_queue_wait_seconds_count", **{"class": c})
        for c in ("interactive", "batch")) == calls


SYSTEM = ("You are a decision function. You will be given a state and one question. "
          "Reply with the answer label only: no words, no punctuation, no explanation.")


def choice_group(state, question, options, label_ids=()):
    """A prompt group as the decision code will build it: the state prefix
    shared, one suffix per cyclic shift (fake model: no chat template)."""
    prefix = f"{SYSTEM}\n\nState:\n{state}\n\nQuestion: {question}\nOptions:\n"
    suffixes = []
    k = len(options)
    for shift in range(k):
        lines = [f"{chr(65 + j)}. {options[(j + shift) % k]}" for j in range(k)]
        suffixes.append("\n".join(lines) + "\nAnswer with the letter only.\nAnswer:")
    return pb.PromptGroup(prefix=pb.Segment(text=prefix),
                          suffixes=[pb.Segment(text=s) for s in suffixes],
                          label_ids=list(label_ids))


def small_request(daemon):
    """A valid Logprobs request of one two-prompt group (labels A, B)."""
    ids = label_ids(daemon.stub, ["A", "B"])
    return pb.LogprobsRequest(groups=[choice_group("s", "Q?", ["x", "y"], ids)])


def label_ids(stub, labels):
    reply = stub.Tokenize(pb.TokenizeRequest(texts=list(labels)), timeout=10)
    ids = [list(item.ids) for item in reply.items]
    assert all(len(i) == 1 for i in ids), ids
    return [i[0] for i in ids]


def raw_call(daemon, method, payload, timeout=10, metadata=None):
    """Sends request bytes as they are, e.g. from with_bytes()."""
    call = daemon.channel.unary_unary(method, request_serializer=None,
                                      response_deserializer=None)
    return call(payload, timeout=timeout, metadata=metadata)


def with_bytes(message, plain: bytes, broken: bytes) -> bytes:
    """`message` serialised with its one occurrence of `plain` replaced by
    `broken` (same length, so every length prefix stays right): how a test
    puts invalid UTF-8 in a string field, which Python protobuf refuses to
    serialise."""
    assert len(plain) == len(broken)
    payload = message.SerializeToString()
    assert payload.count(plain) == 1, (plain, payload)
    return payload.replace(plain, broken)
