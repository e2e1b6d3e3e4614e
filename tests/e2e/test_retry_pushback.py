"""Retry pushback: a refusal that waiting can fix (a full engine queue, busy
decision workers, a loading or draining daemon) carries the gRPC trailer
grpc-retry-pushback-ms; one that waiting cannot fix (a bad request, a message
over the size limit) carries none. Read with a stock grpcio client, as any
gRPC client with a retry policy would."""
import signal
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from conftest import dpb, in_flight, metric, pb, small_request

PUSHBACK = "grpc-retry-pushback-ms"


def refusal(call):
    with pytest.raises(grpc.RpcError) as error:
        call()
    trailers = dict(error.value.trailing_metadata() or ())
    return error.value.code(), error.value.details(), trailers.get(PUSHBACK)


def decide_request():
    return dpb.DecideRequest(states=[dpb.State(text="about genes")], level="L0",
                             questions=[dpb.Question(kind="choice", text="Which?",
                                                     options=["genes", "cells"])])


def test_full_engine_queue_pushes_back(start_daemon):
    daemon = start_daemon("--set", "server.queue_capacity=1", "--set", "model.fake_delay_s=5")
    request = small_request(daemon)
    with ThreadPoolExecutor(max_workers=2) as pool:
        running = pool.submit(daemon.stub.Logprobs, request, timeout=60)
        daemon.wait_metrics(lambda t: metric(t, "mesa_anyjev_inflight_requests") == 1
                            and metric(t, "mesa_anyjev_queue_depth") == 0, "one call running")
        queued = pool.submit(daemon.stub.Logprobs, request, timeout=60)
        daemon.wait_metrics(lambda t: metric(t, "mesa_anyjev_queue_depth") == 1, "one call queued")
        code, details, pushback = refusal(lambda: daemon.stub.Logprobs(request, timeout=60))
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "queue full" in details
        assert pushback == "100"
        # Inside a Decide: the decision worker is free, the engine queue is
        # not, so the Decider's own submit is refused and the Decide fails
        # with that refusal, pushback and all.
        code, details, pushback = refusal(
            lambda: daemon.decisions.Decide(decide_request(), timeout=60))
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "server.queue_capacity" in details
        assert pushback == "100"
        running.result()
        queued.result()


def test_busy_decision_workers_push_back(start_daemon):
    daemon = start_daemon("--set", "decisions.workers=1", "--set", "server.queue_capacity=1",
                          "--set", "model.fake_delay_s=5")
    with ThreadPoolExecutor(max_workers=2) as pool:
        # The one worker runs the first Decide (its job in the engine); the
        # second waits for the worker; the third finds no room.
        first = pool.submit(daemon.decisions.Decide, decide_request(), timeout=60)
        daemon.wait_metrics(lambda t: metric(t, "mesa_anyjev_inflight_requests") == 1
                            and metric(t, "mesa_anyjev_job_duration_seconds_count") == 1
                            and metric(t, "mesa_anyjev_queue_depth") == 0,
                            "the first Decide in the engine")
        second = pool.submit(daemon.decisions.Decide, decide_request(), timeout=60)
        daemon.wait_metrics(in_flight(2), "the second Decide waiting for the worker")
        code, details, pushback = refusal(
            lambda: daemon.decisions.Decide(decide_request(), timeout=60))
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "decision queue full" in details
        assert pushback == "100"
        first.result()
        second.result()


def test_a_loading_or_stopping_daemon_pushes_back(start_daemon):
    loading = start_daemon("--set", "model.fake_load_s=30", wait_serving=False)
    code, details, pushback = refusal(
        lambda: loading.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=5))
    assert code == grpc.StatusCode.UNAVAILABLE and "loading" in details
    assert pushback == "1000"

    daemon = start_daemon("--set", "model.fake_delay_s=3", "--set", "server.drain_grace_s=30")
    request = small_request(daemon)
    held = daemon.stub.Logprobs.future(request, timeout=60)
    daemon.wait_metrics(in_flight(1), "the held call accepted")
    daemon.signal(signal.SIGTERM)
    daemon.wait_log("draining: health NOT_SERVING")
    code, details, pushback = refusal(lambda: daemon.stub.Logprobs(request, timeout=5))
    assert code == grpc.StatusCode.UNAVAILABLE and "draining" in details
    assert pushback == "500"
    code, _, pushback = refusal(lambda: daemon.decisions.Decide(decide_request(), timeout=5))
    assert code == grpc.StatusCode.UNAVAILABLE and pushback == "500"
    held.result()


def test_refusals_that_waiting_cannot_fix_carry_no_pushback(start_daemon):
    daemon = start_daemon("--set", "server.max_receive_message_bytes=65536")
    code, _, pushback = refusal(lambda: daemon.stub.Logprobs(pb.LogprobsRequest(), timeout=10))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and pushback is None
    big = pb.TokenizeRequest(texts=["x" * 100_000])
    code, _, pushback = refusal(lambda: daemon.stub.Tokenize(big, timeout=10))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and pushback is None
    assert daemon.health_status() == "SERVING"
