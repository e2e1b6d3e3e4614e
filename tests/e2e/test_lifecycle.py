"""Health transitions, graceful drain with calls in flight, and the second
signal, on the real daemon binary."""
import signal
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from conftest import in_flight, pb, run_cli, small_request

CANCELLED_OR_GONE = (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)


def test_not_serving_while_loading_then_serving(start_daemon):
    # The load takes far longer than reading the port file and one check.
    daemon = start_daemon("--set", "model.fake_load_s=10", wait_serving=False)
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
    # Six calls of 1 s each: the drain has 6 s of accepted work to finish.
    daemon = start_daemon("--set", "model.fake_delay_s=1", "--set", "server.drain_grace_s=1.5",
                          "--set", "server.queue_capacity=16")
    request = small_request(daemon)
    with ThreadPoolExecutor(max_workers=6) as pool:
        futures = [pool.submit(daemon.stub.Logprobs, request, timeout=60) for _ in range(6)]
        daemon.wait_metrics(in_flight(6), "six calls accepted")
        daemon.signal(signal.SIGTERM)
        daemon.wait_log("draining")
        assert daemon.health_status() == "NOT_SERVING"
        with pytest.raises(grpc.RpcError) as error:
            daemon.stub.Logprobs(request, timeout=5)
        assert error.value.code() == grpc.StatusCode.UNAVAILABLE
        results = [f.result() for f in futures]  # raises if any failed
    assert all(len(r.groups[0].prompts) == 2 for r in results)
    assert daemon.wait(timeout=60) == 0, daemon.output()
    assert "drained" in daemon.output()


def test_drain_deadline_cancels_what_is_left(start_daemon):
    # Each call, the warm-up included, takes 6 s; the drain allows 1 s. Both
    # calls failing is the proof: the first would end OK had it run its 6 s.
    daemon = start_daemon("--set", "model.fake_delay_s=6", "--set", "server.drain_deadline_s=1")
    request = small_request(daemon)
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(daemon.stub.Logprobs, request, timeout=60) for _ in range(2)]
        daemon.wait_metrics(in_flight(2), "two calls accepted")
        daemon.signal(signal.SIGTERM)
        assert daemon.wait(timeout=60) == 0, daemon.output()
        for f in futures:
            with pytest.raises(grpc.RpcError) as error:
                f.result()
            assert error.value.code() in CANCELLED_OR_GONE
    assert "drained" in daemon.output()


def test_second_signal_exits_at_once(start_daemon):
    # The call takes 8 s and the drain would wait for it. Exiting on the
    # signal's code with the call failed is the proof: a finished drain
    # exits 0 and answers the call.
    daemon = start_daemon("--set", "model.fake_delay_s=8", "--set", "server.drain_deadline_s=60")
    request = small_request(daemon)
    future = daemon.stub.Logprobs.future(request, timeout=60)
    daemon.wait_metrics(in_flight(1), "the call accepted")
    daemon.signal(signal.SIGTERM)
    daemon.wait_log("draining")
    daemon.signal(signal.SIGINT)
    assert daemon.wait(timeout=60) == 128 + signal.SIGINT
    with pytest.raises(grpc.RpcError) as error:
        future.result()
    assert error.value.code() in CANCELLED_OR_GONE
