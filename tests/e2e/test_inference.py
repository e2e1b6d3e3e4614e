"""The Inference service of the real daemon on the fake model, driven by a
Python grpcio client and by the real CLI."""
import json

import grpc
import numpy as np
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from conftest import CLI, DAEMON, choice_group, label_ids, pb, run_cli


def test_model_info_and_cli_agree(daemon):
    info = daemon.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=10)
    assert info.name == "fake"
    assert len(info.identity) == 64 and int(info.identity, 16) >= 0
    assert (info.n_layers, info.hidden_size) == (4, 64)
    assert info.hidden_states and info.early_stop
    assert info.limits.max_top_k == 1000 and info.limits.max_groups == 64
    assert info.limits.max_decide_states == 256 and info.limits.max_decide_questions == 32
    cli = run_cli("info", "--address", daemon.address, "--json")
    assert cli.returncode == 0, cli.stderr
    doc = json.loads(cli.stdout)
    assert doc["name"] == info.name and doc["identity"] == info.identity
    assert doc["n_layers"] == info.n_layers and doc["vocab_size"] == info.vocab_size
    assert doc["limits"]["max_prompt_tokens"] == info.limits.max_prompt_tokens
    assert doc["limits"]["max_decide_states"] == info.limits.max_decide_states
    table = run_cli("info", "--address", daemon.address)
    assert table.returncode == 0 and info.identity in table.stdout and "hidden size" in table.stdout


def test_identity_is_stable_across_restarts(start_daemon):
    a = start_daemon().stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=10).identity
    b = start_daemon().stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=10).identity
    assert a == b


def test_tokenize_labels_are_single_tokens(daemon):
    ids = label_ids(daemon.stub, ["A", " A", "B", "Yes", " No", "7"])
    assert len(set(ids)) == 6
    reply = daemon.stub.Tokenize(pb.TokenizeRequest(texts=["naïve café 你好 🙂"]), timeout=10)
    assert len(reply.items[0].ids) > 0


def test_logprobs_follow_content_and_position(daemon):
    a, b, c = label_ids(daemon.stub, ["A", "B", "C"])
    group = choice_group("the dataset lists protein structures",
                         "What is it about?", ["genes", "protein", "weather"], [a, b, c])
    reply = daemon.stub.Logprobs(pb.LogprobsRequest(groups=[group], top_k=5), timeout=10)
    prompts = reply.groups[0].prompts
    assert len(prompts) == 3
    for shift, prompt in enumerate(prompts):
        lp = np.array(prompt.label_logprobs)
        assert np.all(lp < 0) and np.exp(lp).sum() < 1.0  # a rest-of-vocabulary mass remains
        # "protein" sits at position (1 - shift) mod 3 and wins there.
        assert int(np.argmax(lp)) == (1 - shift) % 3
        assert [t.id for t in prompt.top][:1] == [[a, b, c][(1 - shift) % 3]]
        assert prompt.top[0].logprob == max(lp)
        assert prompt.n_tokens > 20


def test_prompt_groups_equal_single_prompts(daemon):
    a, b = label_ids(daemon.stub, ["A", "B"])
    group = choice_group("state text", "Q?", ["x", "y"], [a, b])
    grouped = daemon.stub.Logprobs(pb.LogprobsRequest(groups=[group]), timeout=10)
    prefix = group.prefix.text
    for i, suffix in enumerate(group.suffixes):
        whole = pb.PromptGroup(prefix=pb.Segment(text=prefix + suffix.text),
                               suffixes=[pb.Segment(text="")], label_ids=[a, b])
        alone = daemon.stub.Logprobs(pb.LogprobsRequest(groups=[whole]), timeout=10)
        assert list(alone.groups[0].prompts[0].label_logprobs) == \
            list(grouped.groups[0].prompts[i].label_logprobs)


def test_hidden_states_shape_bytes_and_layers(daemon):
    group = choice_group("some state", "Which?", ["one", "two", "three"])
    reply = daemon.stub.HiddenStates(pb.HiddenStatesRequest(groups=[group], layers=[0, 2, -1]),
                                     timeout=10)
    assert list(reply.layers) == [0, 2, 4]
    t = reply.hidden
    assert t.dtype == "float32" and list(t.shape) == [3, 3, 64]
    values = np.frombuffer(t.data, dtype="<f4").reshape(t.shape)
    assert np.isfinite(values).all()
    # The last layer is nearly noise-free: its first dims carry the planted
    # position bias / temperature (0.6, 0.2, 0.0) / 0.7 of the three options.
    assert np.allclose(values[:, 2, :3], np.array([0.6, 0.2, 0.0]) / 0.7, atol=0.1)
    again = daemon.stub.HiddenStates(pb.HiddenStatesRequest(groups=[group], layers=[4]), timeout=10)
    assert np.array_equal(np.frombuffer(again.hidden.data, "<f4").reshape(3, 1, 64)[:, 0], values[:, 2])


def test_token_id_segments_match_text_segments(daemon):
    a, b = label_ids(daemon.stub, ["A", "B"])
    group = choice_group("ids or text", "Q?", ["p", "q"], [a, b])
    ids = daemon.stub.Tokenize(pb.TokenizeRequest(texts=[group.prefix.text] + [s.text for s in group.suffixes]),
                               timeout=10)
    as_ids = pb.PromptGroup(prefix=pb.Segment(ids=ids.items[0]),
                            suffixes=[pb.Segment(ids=item) for item in ids.items[1:]], label_ids=[a, b])
    r1 = daemon.stub.Logprobs(pb.LogprobsRequest(groups=[group]), timeout=10)
    r2 = daemon.stub.Logprobs(pb.LogprobsRequest(groups=[as_ids]), timeout=10)
    assert r1 == r2


def test_reflection_lists_services(daemon):
    stub = reflection_pb2_grpc.ServerReflectionStub(daemon.channel)
    replies = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]),
                                        timeout=10)
    names = {s.name for r in replies for s in r.list_services_response.service}
    assert {"mesa.anyjev.v1.Inference", "grpc.health.v1.Health"} <= names


def test_versions():
    import subprocess
    for binary in (DAEMON, CLI):
        out = subprocess.run([binary, "--version"], capture_output=True, text=True)
        assert out.returncode == 0 and "0.1.0" in out.stdout
