"""GPU faults end one call, not the service (docs/reliability.md, "GPU
faults"), on the CPU with the real daemon over a tiny Qwen3: the passes
that mesa-anyjevd's test-only --inject-faults names fail as the device
would (c10::OutOfMemoryError; c10::AcceleratorError of an illegal address).
Out of memory fails the calls of that pass with RESOURCE_EXHAUSTED naming
the pass's size and engine.batch_tokens, and the next call is served; a lost
device turns health NOT_SERVING, fails the calls in flight with UNAVAILABLE
and ends the process with exit code 75. Pass 1 is the warm-up call's."""
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from make_tiny_qwen3 import make  # noqa: E402

from conftest import DAEMON, metric, pb  # noqa: E402

DEVICE_LOST_EXIT = 75


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return make(tmp_path_factory.mktemp("faults") / "tiny-qwen3", heads=4, kv_heads=2)


def call(daemon, seed):
    """One Logprobs call of one prompt group: one pass of the tiny model."""
    ids = [(seed * 7919 + i * 104729) % 150000 for i in range(40)]
    group = pb.PromptGroup(prefix=pb.Segment(ids=pb.TokenIds(ids=ids)),
                           suffixes=[pb.Segment(ids=pb.TokenIds(ids=[11, 12]))], label_ids=[32, 33])
    return daemon.stub.Logprobs(pb.LogprobsRequest(groups=[group]), timeout=120)


def test_out_of_memory_fails_its_pass_and_the_next_call_is_served(start_daemon, checkpoint):
    daemon = start_daemon("--model", str(checkpoint), "--inject-faults", "oom@3",
                          "--set", "engine.batch_tokens=4096", start_timeout=120)
    assert "fault injection armed (--inject-faults, tests only): out of memory at pass 3" \
        in daemon.output()
    first = call(daemon, 1)  # pass 2
    with pytest.raises(grpc.RpcError) as failed:
        call(daemon, 2)  # pass 3
    assert failed.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    message = failed.value.details()
    assert "a forward pass of 42 new tokens (2 segments) ran out of memory on cpu" in message
    assert "lower engine.batch_tokens (4096 now)" in message
    # The pass's KV blocks went back, the service stayed up, and the next
    # call computes what the first one did.
    again = call(daemon, 1)  # pass 4: the prefix cache has call 1's blocks
    assert list(again.groups[0].prompts[0].label_logprobs) == \
        pytest.approx(list(first.groups[0].prompts[0].label_logprobs), abs=1e-5)
    assert daemon.health_status() == "SERVING"
    assert metric(daemon.metrics(), "mesa_anyjev_kv_pool_blocks", state="in_use") == 0
    assert daemon.proc.poll() is None


def test_a_lost_device_stops_serving_fails_the_calls_in_flight_and_exits_75(start_daemon,
                                                                            checkpoint):
    # The grace keeps the port open after the fault, so that health can be
    # read (a bound on failure only: the fault turns health NOT_SERVING
    # before the failing call's status leaves the daemon).
    daemon = start_daemon("--model", str(checkpoint), "--inject-faults", "lost@3",
                          "--set", "server.drain_grace_s=20", start_timeout=120)
    call(daemon, 1)  # pass 2
    with ThreadPoolExecutor(6) as pool:  # pass 3 and the calls queued behind it
        futures = [pool.submit(call, daemon, seed) for seed in range(10, 16)]
        errors = []
        for future in futures:
            with pytest.raises(grpc.RpcError) as failed:
                future.result()
            errors.append(failed.value)
    assert {e.code() for e in errors} == {grpc.StatusCode.UNAVAILABLE}, errors
    details = [e.details() for e in errors]
    assert any("the device failed in a forward pass (CUDA error: an illegal memory access was "
               "encountered" in d and f"exits with code {DEVICE_LOST_EXIT}" in d
               for d in details), details
    assert all("device failed" in d or "draining" in d for d in details), details
    assert daemon.health_status() == "NOT_SERVING"
    with pytest.raises(grpc.RpcError) as refused:
        call(daemon, 99)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    assert daemon.wait(timeout=120) == DEVICE_LOST_EXIT
    daemon.wait_log(f"exit code {DEVICE_LOST_EXIT} after the drain")


@pytest.mark.parametrize("spec, why", [
    ("oom", "'oom' is not a fault"),
    ("oom@0", "'oom@0' is not a fault"),
    ("melt@2", "'melt' is not a fault (oom, lost or hold)"),
])
def test_a_bad_fault_spec_is_refused(spec, why, tmp_path):
    out = subprocess.run([DAEMON, "--model", "fake", "--inject-faults", spec],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and f"--inject-faults: {why}" in out.stderr, out.stderr


def test_faults_need_a_model_that_runs_passes_and_stay_out_of_help(start_daemon):
    daemon = start_daemon("--inject-faults", "oom@2", wait_serving=False)
    assert daemon.wait(timeout=60) == 2
    assert "--inject-faults: the fake and composite backends run no forward passes" \
        in daemon.output()
    shown = subprocess.run([DAEMON, "--help"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "inject" not in shown.stdout
