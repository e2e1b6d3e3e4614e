"""Malformed and oversize requests: each gets INVALID_ARGUMENT naming the field
(or the library's RESOURCE_EXHAUSTED for an oversize message), and a valid
request right after each bad one still succeeds."""
import grpc
import pytest

from conftest import choice_group, label_ids, pb, raw_call, with_bytes

S = pb.Segment
G = pb.PromptGroup


def good(ids):
    return pb.LogprobsRequest(groups=[choice_group("state", "Q?", ["x", "y"], ids)])


BAD_LOGPROBS = [
    ("no groups", lambda ids: pb.LogprobsRequest(), "groups"),
    ("no suffixes", lambda ids: pb.LogprobsRequest(groups=[G(prefix=S(text="a"), label_ids=ids)]),
     "groups[0].suffixes"),
    ("empty prompt", lambda ids: pb.LogprobsRequest(groups=[G(suffixes=[S(text="")], label_ids=ids)]),
     "groups[0].suffixes[0]"),
    ("token id out of range", lambda ids: pb.LogprobsRequest(
        groups=[G(prefix=S(ids=pb.TokenIds(ids=[1, 2, 99999999])), suffixes=[S()], label_ids=ids)]),
     "groups[0].prefix.ids[2]"),
    ("negative token id", lambda ids: pb.LogprobsRequest(
        groups=[G(suffixes=[S(ids=pb.TokenIds(ids=[-1]))], label_ids=ids)]), "groups[0].suffixes[0].ids[0]"),
    ("label id out of range", lambda ids: pb.LogprobsRequest(
        groups=[G(suffixes=[S(text="x")], label_ids=[5, 10**6])]), "groups[0].label_ids[1]"),
    ("nothing asked", lambda ids: pb.LogprobsRequest(groups=[G(suffixes=[S(text="x")])]), "label_ids"),
    ("negative top_k", lambda ids: pb.LogprobsRequest(groups=[G(suffixes=[S(text="x")], label_ids=ids)],
                                                      top_k=-1), "top_k"),
    ("huge top_k", lambda ids: pb.LogprobsRequest(groups=[G(suffixes=[S(text="x")], label_ids=ids)],
                                                  top_k=10**6), "top_k"),
    ("too many groups", lambda ids: pb.LogprobsRequest(groups=[G(suffixes=[S(text="x")], label_ids=ids)] * 65),
     "limits.max_groups"),
    ("too many suffixes", lambda ids: pb.LogprobsRequest(groups=[G(suffixes=[S(text="x")] * 33, label_ids=ids)]),
     "limits.max_suffixes"),
    ("too many labels", lambda ids: pb.LogprobsRequest(groups=[G(suffixes=[S(text="x")], label_ids=[1] * 65)]),
     "limits.max_label_ids"),
    ("prompt too long", lambda ids: pb.LogprobsRequest(groups=[G(prefix=S(text="x" * 9000),
                                                                 suffixes=[S(text="y")], label_ids=ids)]),
     "limits.max_prompt_tokens"),
]


@pytest.mark.parametrize("name,make,field", BAD_LOGPROBS, ids=[c[0] for c in BAD_LOGPROBS])
def test_bad_logprobs_requests(daemon, name, make, field):
    ids = label_ids(daemon.stub, ["A", "B"])
    with pytest.raises(grpc.RpcError) as error:
        daemon.stub.Logprobs(make(ids), timeout=10)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT, error.value.details()
    assert field in error.value.details()
    assert daemon.stub.Logprobs(good(ids), timeout=10).groups[0].prompts


BAD_HIDDEN = [
    ("no layers", [], "layers"),
    ("layer too deep", [5], "layers[0]"),
    ("layer too negative", [0, -6], "layers[1]"),
    ("too many layers", [1] * 65, "limits.max_layers"),
]


@pytest.mark.parametrize("name,layers,field", BAD_HIDDEN, ids=[c[0] for c in BAD_HIDDEN])
def test_bad_hidden_state_requests(daemon, name, layers, field):
    group = choice_group("state", "Q?", ["x", "y"])
    with pytest.raises(grpc.RpcError) as error:
        daemon.stub.HiddenStates(pb.HiddenStatesRequest(groups=[group], layers=layers), timeout=10)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in error.value.details()


def test_bad_tokenize_requests(daemon):
    cases = [(pb.TokenizeRequest(), "texts"),
             (pb.TokenizeRequest(texts=["x"] * 257), "limits.max_texts")]
    for request, field in cases:
        with pytest.raises(grpc.RpcError) as error:
            daemon.stub.Tokenize(request, timeout=10)
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert field in error.value.details()


def test_invalid_utf8_text_is_refused_naming_the_field(daemon):
    # Text fields are strings: the daemon's request parse names the field and
    # the byte offset (Python protobuf will not serialise such a request).
    ids = label_ids(daemon.stub, ["A", "B"])
    logprobs = pb.LogprobsRequest(groups=[G(prefix=S(text="ok ??"), suffixes=[S(text="x")],
                                            label_ids=ids)])
    tokenize = pb.TokenizeRequest(texts=["fine", "(("])
    for method, payload, needle in [
            ("Logprobs", with_bytes(logprobs, b"ok ??", b"ok \xff\xfe"),
             "groups[0].prefix.text: invalid UTF-8 at byte offset 3"),
            ("Tokenize", with_bytes(tokenize, b"((", b"\xc3\x28"),
             "texts[1]: invalid UTF-8 at byte offset 0")]:
        with pytest.raises(grpc.RpcError) as error:
            raw_call(daemon, f"/mesa.anyjev.v1.Inference/{method}", payload)
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT, error.value.details()
        assert needle in error.value.details(), error.value.details()
    assert daemon.stub.Logprobs(good(ids), timeout=10).groups[0].prompts


def test_hidden_state_response_over_send_cap_is_refused(start_daemon):
    daemon = start_daemon("--set", "server.max_send_message_bytes=65536")
    group = choice_group("state", "Q?", ["x"] * 20)
    with pytest.raises(grpc.RpcError) as error:
        daemon.stub.HiddenStates(pb.HiddenStatesRequest(groups=[group], layers=[0, 1, 2, 3, 4] * 4), timeout=10)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "server.max_send_message_bytes" in error.value.details()


def test_oversize_message_is_resource_exhausted(start_daemon):
    daemon = start_daemon("--set", "server.max_receive_message_bytes=65536")
    request = pb.TokenizeRequest(texts=["x" * 70000])
    with pytest.raises(grpc.RpcError) as error:
        daemon.stub.Tokenize(request, timeout=10)
    assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert daemon.stub.Tokenize(pb.TokenizeRequest(texts=["ok"]), timeout=10).items
