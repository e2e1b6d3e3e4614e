"""Backpressure, deadlines and cancellation: work that cannot or need not run
never reaches the model, and the daemon says why. Each test proves its claim
by the order of events or by the daemon's own counts, never by a stopwatch."""
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from conftest import in_flight, metric, small_request, started


def code_of(future):
    try:
        future.result()
        return grpc.StatusCode.OK
    except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
            assert "server.queue_capacity" in e.details()
        return e.code()


def test_queue_full_is_resource_exhausted_at_once(start_daemon):
    # One call runs for 5 s; two wait; the other five are refused while the
    # first still runs (refused at once, not after waiting for room). The
    # capacity counts the calls waiting, as the queue depth does.
    daemon = start_daemon("--set", "server.queue_capacity=2", "--set", "model.fake_delay_s=5")
    request = small_request(daemon)
    with ThreadPoolExecutor(max_workers=8) as pool:
        first = pool.submit(daemon.stub.Logprobs, request, timeout=60)
        daemon.wait_metrics(lambda t: metric(t, "mesa_anyjev_inflight_requests") == 1
                            and metric(t, "mesa_anyjev_queue_depth") == 0, "the first call running")
        queued = [pool.submit(daemon.stub.Logprobs, request, timeout=60) for _ in range(2)]
        daemon.wait_metrics(lambda t: metric(t, "mesa_anyjev_queue_depth") == 2, "two calls queued")
        refused = [pool.submit(daemon.stub.Logprobs, request, timeout=60) for _ in range(5)]
        for f in refused:
            assert code_of(f) == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert not first.done()
        assert [code_of(f) for f in [first, *queued]] == [grpc.StatusCode.OK] * 3
    metrics = daemon.metrics()
    assert metric(metrics, "mesa_anyjev_rejected_total", reason="queue_full", tenant="") == 5
    assert daemon.health_status() == "SERVING"


def test_client_deadline_exceeded_and_expired_work_never_runs(start_daemon):
    daemon = start_daemon("--set", "model.fake_delay_s=5")
    request = small_request(daemon)
    with ThreadPoolExecutor(max_workers=4) as pool:
        blocker = pool.submit(daemon.stub.Logprobs, request, timeout=60)
        daemon.wait_metrics(in_flight(1), "the blocker running")
        with pytest.raises(grpc.RpcError) as error:
            daemon.stub.Logprobs(request, timeout=0.2)  # waits behind the blocker
        assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert not blocker.done()  # the deadline, not the queue, ended it
        blocker.result()
    # The expired call is dropped from the queue without running the model.
    daemon.wait_metrics(lambda t: metric(t, "mesa_anyjev_skipped_total", reason="deadline")
                        + metric(t, "mesa_anyjev_skipped_total", reason="cancelled") == 1,
                        "the expired call skipped")
    metrics = daemon.metrics()
    assert metric(metrics, "mesa_anyjev_job_duration_seconds_count") == 2  # warm-up + blocker


def test_server_default_deadline_applies_to_calls_without_one(start_daemon):
    # The call needs 2 s and has no deadline of its own: only the server's
    # 0.3 s default can end it with DEADLINE_EXCEEDED.
    daemon = start_daemon("--set", "model.fake_delay_s=2", "--set", "server.default_deadline_s=0.3",
                          "--set", "server.max_deadline_s=10")
    with pytest.raises(grpc.RpcError) as error:
        daemon.stub.Logprobs(small_request(daemon))  # no client deadline
    assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


def test_cancelled_call_stops_and_frees_the_engine(start_daemon):
    delay = 5.0
    daemon = start_daemon("--set", f"model.fake_delay_s={delay}")
    future = daemon.stub.Logprobs.future(small_request(daemon), timeout=60)
    # Running, not queued: a cancel in the queue skips the call unrun.
    daemon.wait_metrics(lambda t: in_flight(1)(t) and started(2)(t), "the call running")
    future.cancel()
    with pytest.raises(grpc.FutureCancelledError):
        future.result()
    # The status is recorded before gRPC releases the call, so wait for both.
    metrics = daemon.wait_metrics(
        lambda t: metric(t, "mesa_anyjev_requests_total", code="CANCELLED", method="Logprobs") == 1
        and metric(t, "mesa_anyjev_inflight_requests") == 0
        and metric(t, "mesa_anyjev_job_duration_seconds_count") == 2, "the cancel recorded")
    assert metric(metrics, "mesa_anyjev_queue_depth") == 0
    # The engine's own clock: the warm-up ran its full delay, the cancelled
    # call stopped well before its own.
    spent = metric(metrics, "mesa_anyjev_job_duration_seconds_sum")
    assert delay <= spent < 2 * delay
