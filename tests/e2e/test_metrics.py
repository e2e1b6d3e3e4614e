"""The Prometheus endpoint: the families the chassis promises, with counts
that match the calls made."""
import re

import grpc
import pytest

from conftest import choice_group, label_ids, pb


def value(text, sample):
    m = re.search(rf"^{re.escape(sample)} (\S+)$", text, re.M)
    assert m, f"{sample} not in /metrics"
    return float(m.group(1))


def test_metrics_count_calls(daemon):
    ids = label_ids(daemon.stub, ["A", "B"])  # 1 Tokenize
    request = pb.LogprobsRequest(groups=[choice_group("s", "Q?", ["x", "y"], ids)])
    for _ in range(3):
        daemon.stub.Logprobs(request, timeout=10)
    with pytest.raises(grpc.RpcError):
        daemon.stub.Logprobs(pb.LogprobsRequest(), timeout=10)
    # gRPC releases a call just after its status is sent: wait for the gauge.
    text = daemon.wait_metrics(lambda t: value(t, "mesa_anyjev_inflight_requests") == 0,
                               "no call in flight")
    assert re.search(r'^mesa_anyjev_build_info\{commit="[^"]+",version="0\.1\.0"\} 1$', text, re.M)
    assert value(text, 'mesa_anyjev_requests_total{code="OK",method="Logprobs"}') == 3
    assert value(text, 'mesa_anyjev_requests_total{code="INVALID_ARGUMENT",method="Logprobs"}') == 1
    assert value(text, 'mesa_anyjev_requests_total{code="OK",method="Tokenize"}') == 1
    assert value(text, 'mesa_anyjev_request_duration_seconds_count{method="Logprobs"}') == 4
    assert value(text, 'mesa_anyjev_queue_depth') == 0
    assert value(text, 'mesa_anyjev_inflight_requests') == 0
    assert value(text, 'mesa_anyjev_model_loaded') == 1
    waits = sum(value(text, f'mesa_anyjev_queue_wait_seconds_count{{class="{c}"}}')
                for c in ("interactive", "batch"))
    assert waits >= 4  # warm-up + 3
    assert value(text, 'mesa_anyjev_prompt_tokens_total') > 0
    assert "# TYPE mesa_anyjev_request_duration_seconds histogram" in text
