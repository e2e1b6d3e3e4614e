"""Any gRPC client, not only ours (issue 33, item 6), against the real
daemon: Decide takes a question by its id alone and uses the definition the
daemon serves (what ListQuestions lists), echoed in the decision as the
Python client's resolution does; an id it does not serve is NOT_FOUND naming
questions[i].id, the closest id and the ids served; an id with a full
definition is that definition. grpcurl runs the docs/rpc.md line as written.
And every refusal that concerns one state starts with states[i], so a client
can tell which state failed."""
import json

import grpc
import pytest

from conftest import dpb, raw_call, with_bytes
from test_grpcurl import AUTH, ROOT, TOKEN, run_lines

BY_ID = """grpcurl -plaintext -H "$AUTH" -d '{"states": [{"text": "A column of species names"}], "questions": [{"id": "term.fits"}, {"id": "column.aspect"}]}' $ADDR mesa.anyjev.v1.Decisions/Decide\n"""


def refusal(call):
    with pytest.raises(grpc.RpcError) as error:
        call()
    return error.value.code(), error.value.details()


def served(daemon, ids, metadata=None):
    reply = daemon.decisions.ListQuestions(dpb.ListQuestionsRequest(ids=ids), timeout=10,
                                           metadata=metadata)
    return [s.question for s in reply.questions], [s.key for s in reply.questions]


def fields(d):
    return (d.state_index, d.question_index, d.question_id, d.question_key, d.kind,
            list(d.options), d.level, list(d.probs))


def test_a_question_by_id_alone_is_the_served_one(daemon):
    states = [dpb.State(text="A column of species names"),
              dpb.State(json='{"name": "depth", "unit": "m"}')]
    ids = ["term.fits", "column.aspect"]
    definitions, keys = served(daemon, ids)
    by_id = daemon.decisions.Decide(dpb.DecideRequest(
        states=states, questions=[dpb.Question(id=i) for i in ids]), timeout=30)
    spelled = daemon.decisions.Decide(dpb.DecideRequest(
        states=states, questions=definitions), timeout=30)
    assert [fields(d) for d in by_id.decisions] == [fields(d) for d in spelled.decisions]
    assert [(d.question_id, d.question_key) for d in by_id.decisions] == list(zip(ids, keys)) * 2
    assert list(by_id.decisions[1].options) == list(definitions[1].options)

    # An id with a full definition of its own is that definition: its key
    # is computed from it, not the served one.
    own = dpb.Question(id="term.fits", kind="noul", text="Is this about plants?")
    mine = daemon.decisions.Decide(dpb.DecideRequest(states=states[:1], questions=[own]),
                                   timeout=30)
    assert mine.decisions[0].question_id == "term.fits"
    assert mine.decisions[0].question_key != keys[0]
    # An id and a text but no kind is no question by id: refused as before.
    code, details = refusal(lambda: daemon.decisions.Decide(dpb.DecideRequest(
        states=states[:1], questions=[dpb.Question(id="term.fits", text="x")]), timeout=30))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details.startswith("questions[0].kind: ")


def test_an_id_not_served_is_refused_naming_the_served_ids(daemon):
    every = [s.question.id for s in daemon.decisions.ListQuestions(
        dpb.ListQuestionsRequest(), timeout=10).questions]
    code, details = refusal(lambda: daemon.decisions.Decide(dpb.DecideRequest(
        states=[dpb.State(text="x")],
        questions=[dpb.Question(id="term.fits"), dpb.Question(id="term.fit")]), timeout=30))
    assert code == grpc.StatusCode.NOT_FOUND
    assert details.startswith(
        "questions[1].id: no question with id 'term.fit' (did you mean 'term.fits'?)")
    assert details.endswith("ids served: " + ", ".join(every)), details
    assert len(every) == 17


def test_grpcurl_decides_by_id_as_documented(start_daemon):
    assert AUTH + BY_ID in (ROOT / "docs" / "rpc.md").read_text()
    daemon = start_daemon("--set", "auth.token_env=MESA_TEST_TOKEN", env={"MESA_TEST_TOKEN": TOKEN})
    done = run_lines(daemon, AUTH + BY_ID)
    assert done.returncode == 0, done.stderr
    _, keys = served(daemon, ["term.fits", "column.aspect"],
                     metadata=[("authorization", f"Bearer {TOKEN}")])
    reply = json.loads(done.stdout)
    assert [(d["question_id"], d["question_key"]) for d in reply["decisions"]] == [
        ("term.fits", keys[0]), ("column.aspect", keys[1])]
    wrong = run_lines(daemon, AUTH + BY_ID.replace('"term.fits"', '"term.fit"'))
    assert wrong.returncode != 0 and "Code: NotFound" in wrong.stderr
    assert "questions[0].id: no question with id 'term.fit' (did you mean 'term.fits'?)" \
        in wrong.stderr


def test_a_refusal_of_one_state_starts_with_states_i(start_daemon):
    daemon = start_daemon("--set", "limits.max_prompt_tokens=2000",
                          "--set", "limits.max_text_bytes=20000")
    question = [dpb.Question(id="term.fits")]

    def decide(states):
        return refusal(lambda: daemon.decisions.Decide(
            dpb.DecideRequest(states=states, questions=question, level="L0"), timeout=30))

    ok = dpb.State(text="a short state")
    cases = [
        # Too long a prompt (the fake model: a token per byte).
        ([ok, ok, dpb.State(text="y" * 5000)], "states[2]: a decision prompt of "),
        ([ok, dpb.State(json="{not json")], "states[1].json: "),
        ([ok, dpb.State(json='{"a": 1, "a": 2}')], "states[1].json: "),
        ([ok, ok, ok, dpb.State(text="z" * 20001)], "states[3].text: 20001 bytes exceed "
                                                    "limits.max_text_bytes=20000"),
        # 12001 bytes, whose indent=2 rendering (one line per item) is over
        # the text limit.
        ([dpb.State(json="[" + ",".join(["1"] * 6000) + "]"), ok],
         "states[0].json: renders (json.dumps indent=2) to more than"),
    ]
    for states, start in cases:
        code, details = decide(states)
        assert code == grpc.StatusCode.INVALID_ARGUMENT, details
        assert details.startswith(start), (start, details)
    # Invalid UTF-8 (a request Python protobuf will not build): the request
    # parse names the field first too.
    request = dpb.DecideRequest(states=[ok, dpb.State(text="caf?")], questions=question)
    code, details = refusal(lambda: raw_call(daemon, "/mesa.anyjev.v1.Decisions/Decide",
                                             with_bytes(request, b"caf?", b"caf\xff")))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details == "states[1].text: invalid UTF-8 at byte offset 3"
    # The same state alone in a call is named states[0].
    code, details = decide([dpb.State(text="y" * 5000)])
    assert details.startswith("states[0]: a decision prompt of ")
