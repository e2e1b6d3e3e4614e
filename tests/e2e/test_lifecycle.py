"""Health transitions, graceful drain with calls in flight, and the second
signal, on the real daemon binary."""
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from conftest import choice_group, label_ids, pb, run_cli


def test_not_serving_while_loading_then_serving(start_daemon):
    daemon = start_daemon("--set", "model.fake_load_s=3", wait_serving=False)
    assert daemon.health_status() == "NOT_SERVING"
    assert daemon.health_status("mesa.anyjev.v1.Inference") == "NOT_SERVING"
    with pytest.raises(grpc.RpcError) as error:
        daemon.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=5)
    assert error.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "loading" in error.value.details()
    cli = run_cli("health", "--address", daemon.address)
    assert cli.returncode == 1 and "NOT_SERVING" in cli.stdout
    daemon.wait_for("SERVING", timeout=30)
    assert daemon.health_status("mesa.anyjev.v1.Inference") == "SERVING"
    assert "mesa_anyjev_model_loaded 1" in daemon.metrics()
    cli = run_cli("health", "--address", daemon.address)
    assert cli.returncode == 0 and "SERVING" in cli.stdout


def test_cli_health_unreachable_exits_1():
    cli = run_cli("health", "--address", "127.0.0.1:1", "--set", "client.timeout_s=2")
    assert cli.returncode == 1
    assert "127.0.0.1:1" in cli.stderr


def test_drain_finishes_calls_in_flight_and_refuses_new_ones(start_daemon):
    daemon = start_daemon("--set", "model.fake_delay_s=0.5", "--set", "server.drain_grace_s=1.5",
                          "--set", "server.queue_capacity=16")
    ids = label_ids(daemon.stub, ["A", "B"])
    request = pb.LogprobsRequest(groups=[choice_group("s", "Q?", ["x", "y"], ids)])
    with ThreadPoolExecutor(max_workers=6) as pool:
        futures = [pool.submit(daemon.stub.Logprobs, request, timeout=30) for _ in range(6)]
        time.sleep(0.3)  # all six accepted: one runs, five wait in the queue
        signalled = time.monotonic()
        daemon.signal(signal.SIGTERM)
        time.sleep(0.3)
        assert daemon.health_status() == "NOT_SERVING"
        with pytest.raises(grpc.RpcError) as error:
            daemon.stub.Logprobs(request, timeout=5)
        assert error.value.code() == grpc.StatusCode.UNAVAILABLE
        results = [f.result() for f in futures]  # raises if any failed
    assert all(len(r.groups[0].prompts) == 2 for r in results)
    assert daemon.wait(timeout=30) == 0
    # 6 x 0.5 s of work plus the grace period, not the 30 s drain deadline.
    assert time.monotonic() - signalled < 10
    log = daemon.output()
    assert "draining" in log and "drained" in log


def test_drain_deadline_cancels_what_is_left(start_daemon):
    # Each call, the warm-up included, takes 6 s; the drain allows 1 s.
    daemon = start_daemon("--set", "model.fake_delay_s=6", "--set", "server.drain_deadline_s=1")
    ids = label_ids(daemon.stub, ["A", "B"])
    request = pb.LogprobsRequest(groups=[choice_group("s", "Q?", ["x", "y"], ids)])
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(daemon.stub.Logprobs, request, timeout=60) for _ in range(2)]
        time.sleep(0.3)
        start = time.monotonic()
        daemon.signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0
        assert time.monotonic() - start < 6
        for f in futures:
            with pytest.raises(grpc.RpcError):
                f.result()


def test_second_signal_exits_at_once(start_daemon):
    daemon = start_daemon("--set", "model.fake_delay_s=5", "--set", "server.drain_deadline_s=60")
    ids = label_ids(daemon.stub, ["A", "B"])
    request = pb.LogprobsRequest(groups=[choice_group("s", "Q?", ["x", "y"], ids)])
    future = daemon.stub.Logprobs.future(request, timeout=60)
    time.sleep(0.3)
    daemon.signal(signal.SIGTERM)
    time.sleep(0.5)
    assert daemon.proc.poll() is None  # still draining the 5 s call
    start = time.monotonic()
    daemon.signal(signal.SIGINT)
    assert daemon.wait(timeout=10) == 128 + signal.SIGINT
    assert time.monotonic() - start < 2
    with pytest.raises(grpc.RpcError):
        future.result()
