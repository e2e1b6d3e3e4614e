"""Backpressure, deadlines and cancellation: work that cannot or need not run
never reaches the model, and the daemon says why."""
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from conftest import choice_group, label_ids, pb


def counter(metrics, name, **labels):
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    pattern = rf"^{name}\{{{re.escape(want)}\}} (\S+)$" if labels else rf"^{name} (\S+)$"
    m = re.search(pattern, metrics, re.M)
    return float(m.group(1)) if m else 0.0


def request_for(daemon):
    ids = label_ids(daemon.stub, ["A", "B"])
    return pb.LogprobsRequest(groups=[choice_group("s", "Q?", ["x", "y"], ids)])


def test_queue_full_is_resource_exhausted_at_once(start_daemon):
    daemon = start_daemon("--set", "server.queue_capacity=2", "--set", "model.fake_delay_s=1")
    request = request_for(daemon)
    codes, latencies = [], []
    lock = threading.Lock()

    def call():
        start = time.monotonic()
        try:
            daemon.stub.Logprobs(request, timeout=30)
            code = grpc.StatusCode.OK
        except grpc.RpcError as e:
            code = e.code()
            if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
                assert "server.queue_capacity" in e.details()
        with lock:
            codes.append(code)
            latencies.append((code, time.monotonic() - start))

    with ThreadPoolExecutor(max_workers=8) as pool:
        first = pool.submit(call)
        time.sleep(0.2)  # the first call occupies the engine thread
        rest = [pool.submit(call) for _ in range(7)]
        for f in [first, *rest]:
            f.result()
    assert codes.count(grpc.StatusCode.OK) == 3  # one running + two queued
    assert codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED) == 5
    assert max(t for c, t in latencies if c == grpc.StatusCode.RESOURCE_EXHAUSTED) < 0.5
    assert counter(daemon.metrics(), "mesa_anyjev_rejected_total", reason="queue_full") == 5
    assert daemon.health_status() == "SERVING"


def test_client_deadline_exceeded_and_expired_work_never_runs(start_daemon):
    daemon = start_daemon("--set", "model.fake_delay_s=1")
    request = request_for(daemon)
    with ThreadPoolExecutor(max_workers=4) as pool:
        blocker = pool.submit(daemon.stub.Logprobs, request, timeout=30)
        time.sleep(0.2)
        start = time.monotonic()
        with pytest.raises(grpc.RpcError) as error:
            daemon.stub.Logprobs(request, timeout=0.2)  # waits behind the blocker
        assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert time.monotonic() - start < 0.5
        blocker.result()
    time.sleep(0.2)
    metrics = daemon.metrics()
    # The expired call was dropped from the queue without running the model.
    assert counter(metrics, "mesa_anyjev_skipped_total", reason="deadline") + \
        counter(metrics, "mesa_anyjev_skipped_total", reason="cancelled") == 1


def test_server_default_deadline_applies_to_calls_without_one(start_daemon):
    daemon = start_daemon("--set", "model.fake_delay_s=2", "--set", "server.default_deadline_s=0.3",
                          "--set", "server.max_deadline_s=10")
    start = time.monotonic()
    with pytest.raises(grpc.RpcError) as error:
        daemon.stub.Logprobs(request_for(daemon))  # no client deadline
    assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - start < 2


def test_cancelled_call_stops_and_frees_the_engine(start_daemon):
    daemon = start_daemon("--set", "model.fake_delay_s=3")
    future = daemon.stub.Logprobs.future(request_for(daemon), timeout=30)
    time.sleep(0.3)
    cancelled_at = time.monotonic()
    future.cancel()
    with pytest.raises(grpc.FutureCancelledError):
        future.result()
    # The engine notices within milliseconds, not after the 3 s the call would take.
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        metrics = daemon.metrics()
        # The status is recorded before gRPC releases the call, so wait for both.
        if counter(metrics, "mesa_anyjev_requests_total", code="CANCELLED", method="Logprobs") == 1 \
                and counter(metrics, "mesa_anyjev_inflight_requests") == 0:
            break
        time.sleep(0.05)
    assert time.monotonic() - cancelled_at < 2
    assert counter(metrics, "mesa_anyjev_inflight_requests") == 0
    assert counter(metrics, "mesa_anyjev_queue_depth") == 0
