"""mesa.anyjev.v1.Decisions over gRPC on the fake model: every level, what a
decision carries, fitting and artifacts (export, load at start, load over
RPC), and each bad input with the status code docs/rpc.md documents."""
import json
import threading

import grpc
import pytest

from conftest import dpb, raw_call, run_cli, with_bytes

TOPICS = ["genes", "proteins", "cells", "viruses"]


def choice(options=TOPICS, text="What is it about?", **kw):
    return dpb.Question(kind="choice", text=text, options=options, **kw)


def states(texts):
    return [dpb.State(text=t) for t in texts]


def decide(daemon, texts, questions, level="L0", timeout=30, **kw):
    return daemon.decisions.Decide(dpb.DecideRequest(states=states(texts), questions=questions,
                                                     level=level, **kw), timeout=timeout)


def code_of(call):
    with pytest.raises(grpc.RpcError) as err:
        call()
    return err.value.code(), err.value.details()


def labelled(n):
    texts = [f"About {TOPICS[i % 4]}, item {i}" for i in range(n)]
    return texts, [i % 4 for i in range(n)]


def test_decide_levels_and_fields(daemon):
    assert daemon.health_status("mesa.anyjev.v1.Decisions") == "SERVING"
    reply = decide(daemon, ["A study of proteins"],
                   [choice(id="topic"), dpb.Question(kind="noul", text="Is it biology?"),
                    dpb.Question(kind="score", text="How big?", bins=4)], level="L0",
                   return_prompts=True)
    assert reply.model == "fake"
    topic, noul, score = reply.decisions
    assert (topic.question_id, topic.kind, topic.level) == ("topic", "choice", "L0")
    assert topic.answer == "proteins" and topic.answer_index == 1
    assert abs(sum(topic.probs) - 1) < 1e-12 and topic.confidence == max(topic.probs)
    assert len(topic.question_key) == 16
    assert topic.diagnostics.shifts_read == 4 and len(topic.diagnostics.prompt_texts) == 4
    assert topic.diagnostics.prior_method == "none" and topic.diagnostics.answer_mass > 0.99
    assert len(topic.diagnostics.prompt_sha256) == 64
    assert noul.HasField("p_true") and noul.p_true == noul.probs[0]
    assert noul.diagnostics.shifts_read == 2
    assert score.HasField("score_value") and score.diagnostics.shifts_read == 1
    assert list(score.options) == ["0 to 0.25", "0.25 to 0.5", "0.5 to 0.75", "0.75 to 1"]
    raw = decide(daemon, ["A study of proteins"], [choice()], level="raw")
    assert raw.decisions[0].level == "raw" and raw.decisions[0].diagnostics.shifts_read == 1


def test_json_states_render_as_the_reference_does(daemon):
    state = dpb.State(json='{"name": "t\\u00e9", "n": 1.0, "tags": ["a"]}')
    reply = daemon.decisions.Decide(dpb.DecideRequest(
        states=[state], questions=[choice()], level="raw", return_prompts=True), timeout=30)
    text = reply.decisions[0].diagnostics.prompt_texts[0]
    want = json.dumps({"name": "t\u00e9", "n": 1.0, "tags": ["a"]}, indent=2, ensure_ascii=False)
    assert f"State:\n{want}\n\nQuestion:" in text


def test_l0_removes_the_position_bias_that_flips_raw(daemon):
    texts = [f"Record {i} of a survey" for i in range(24)]
    flips = {}
    for level in ("raw", "L0"):
        fwd = decide(daemon, texts, [choice()], level=level)
        bwd = decide(daemon, texts, [choice(list(reversed(TOPICS)))], level=level)
        flips[level] = sum(a.answer != b.answer for a, b in
                           zip(fwd.decisions, bwd.decisions)) / len(texts)
    assert flips["raw"] >= 0.9 and flips["L0"] <= 0.05, flips


def test_fit_l1_l2_then_auto_and_require(daemon):
    q = choice(id="topic")
    code, details = code_of(lambda: decide(daemon, ["x"], [q], level="auto", require="L1"))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "L1 artifact" in details
    code, details = code_of(lambda: decide(daemon, ["x"], [q], level="L2"))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "head" in details

    texts, labels = labelled(24)
    fit = daemon.decisions.Fit(dpb.FitRequest(question=q, states=states(texts), labels=labels,
                                              level="L1"), timeout=60)
    artifact = json.loads(fit.artifact_json)
    assert fit.level == "L1" and artifact["method"] == "temperature" and fit.temperature > 0
    l1 = decide(daemon, texts[:4], [q], level="auto", require="L1")
    assert {d.level for d in l1.decisions} == {"L1"}
    assert l1.decisions[0].diagnostics.prior_method.startswith("frozen:")

    fit2 = daemon.decisions.Fit(dpb.FitRequest(question=q, states=states(texts), labels=labels,
                                               level="L2"), timeout=60)
    assert fit2.readout in ("head:lda", "head:ridge") and fit2.layer in (2, 3, 4)
    assert len(fit2.head_version) == 16
    l2 = decide(daemon, texts[:4], [q], level="auto", require="L2")
    d = l2.decisions[0]
    assert d.level == "L2" and d.diagnostics.blocks_executed == fit2.layer
    assert d.diagnostics.head_version == fit2.head_version and d.diagnostics.early_stop
    assert d.diagnostics.n_blocks == 4 and d.diagnostics.n_calib == 24


def test_artifacts_export_load_and_start_with_them(start_daemon, tmp_path):
    first = start_daemon()
    q = choice()
    texts, labels = labelled(16)
    for level in ("L1", "L2"):
        first.decisions.Fit(dpb.FitRequest(question=q, states=states(texts), labels=labels,
                                           level=level), timeout=60)
    before = decide(first, texts, [q], level="L2")
    exported = first.decisions.ExportArtifacts(dpb.ExportArtifactsRequest(), timeout=10)
    file = json.loads(exported.artifacts_json)
    assert file["model"] == "fake" and len(file["artifacts"]) == 1 and len(file["heads"]) == 1
    path = tmp_path / "artifacts.json"
    path.write_text(exported.artifacts_json)

    second = start_daemon("--set", f"decisions.artifacts={path}")
    after = decide(second, texts, [q], level="L2")
    for a, b in zip(before.decisions, after.decisions):
        assert a.diagnostics.head_version == b.diagnostics.head_version
        assert max(abs(x - y) for x, y in zip(a.probs, b.probs)) < 1e-5

    third = start_daemon()
    loaded = third.decisions.LoadArtifacts(dpb.LoadArtifactsRequest(
        artifacts_json=exported.artifacts_json), timeout=10)
    assert loaded.loaded == 2
    file["model"] = "Qwen/Qwen3-8B"
    code, details = code_of(lambda: third.decisions.LoadArtifacts(dpb.LoadArtifactsRequest(
        artifacts_json=json.dumps(file)), timeout=10))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "Qwen/Qwen3-8B" in details
    code, _ = code_of(lambda: third.decisions.LoadArtifacts(dpb.LoadArtifactsRequest(
        artifacts_json="{not json"), timeout=10))
    assert code == grpc.StatusCode.INVALID_ARGUMENT

    # A file for another model stops the daemon at start (exit 2).
    bad = tmp_path / "foreign.json"
    bad.write_text(json.dumps(file))
    refused = start_daemon("--set", f"decisions.artifacts={bad}", wait_serving=False)
    assert refused.wait(timeout=60) == 2
    assert "decisions.artifacts" in refused.output()


def test_batch_prior_and_reset(daemon):
    q = choice()
    texts = [f"Record {i}" for i in range(8)]
    assert decide(daemon, texts[:7], [q]).decisions[0].diagnostics.prior_method == "none"
    assert decide(daemon, texts[7:], [q]).decisions[0].diagnostics.prior_method == "batch"
    key = decide(daemon, texts[7:], [q]).decisions[0].question_key
    daemon.decisions.ResetPriors(dpb.ResetPriorsRequest(question_keys=[key]), timeout=10)
    assert decide(daemon, texts[:1], [q]).decisions[0].diagnostics.prior_method == "none"


def test_carried_priors_leave_the_daemon_alone_and_give_the_same_answer(start_daemon):
    a, b = start_daemon(name="a"), start_daemon(name="b")
    q = choice()
    first = decide(a, [f"Record {i}" for i in range(5)], [q], carry_priors=True)
    assert [p.n for p in first.priors] == [5]
    (entry,) = first.priors
    assert entry.listing.startswith(first.decisions[0].question_key + "|")
    assert (entry.shifts, entry.k, len(entry.sum)) == (4, 4, 16)
    # The daemon counted nothing: 7 states of its own are still below 8.
    assert decide(a, [f"Own {i}" for i in range(7)], [q]).decisions[0] \
        .diagnostics.prior_method == "none"
    # The run's second call crosses 8 with the carried 5, on either daemon.
    texts = [f"Later {i}" for i in range(3)]
    on_a = decide(a, texts, [q], carry_priors=True, priors=first.priors)
    on_b = decide(b, texts, [q], carry_priors=True, priors=first.priors)
    assert on_a.decisions[0].diagnostics.prior_method == "batch"
    assert [list(d.probs) for d in on_a.decisions] == [list(d.probs) for d in on_b.decisions]
    assert [p.n for p in on_b.priors] == [8]
    assert list(on_a.priors[0].sum) == list(on_b.priors[0].sum)


def carried(**fields):
    entry = dict(listing="", shifts=1, k=4, sum=[0.25] * 4, n=1)
    entry.update(fields)
    return dpb.PriorState(**entry)


def test_bad_carried_priors(daemon):
    q = choice()
    listing = decide(daemon, ["x"], [q], carry_priors=True).priors[0].listing
    cases = [
        (dict(priors=[carried(listing=listing)]), "priors: given without carry_priors"),
        (dict(carry_priors=True, priors=[carried(listing="other|x")]),
         "priors[0].listing: is not a listing of a question in this call (send back the "
         "listings the daemon returned)"),
        (dict(carry_priors=True, priors=[carried(listing=listing)] * 2),
         "priors[1].listing: appears twice"),
        (dict(carry_priors=True, priors=[carried(listing=listing, sum=[0.5] * 3)]),
         "priors[0]: sum has 3 values; shifts * k = 4"),
        (dict(carry_priors=True, priors=[carried(listing=listing, sum=[2, 0, 0, 0])]),
         "priors[0]: sum[0]=2 is not a sum of n=1 probabilities"),
        (dict(carry_priors=True, priors=[carried(listing=listing, n=0)]),
         "priors[0]: n=0 is outside [1, 2^53]"),
        (dict(carry_priors=True, priors=[carried(listing=listing, shifts=0, sum=[])]),
         "priors[0]: shifts=0 is outside [1, 256]"),
        (dict(carry_priors=True, priors=[carried(listing=f"{listing}{i}") for i in range(129)]),
         "priors: 129 entries exceed 4 per question (limits.max_decide_questions=32)"),
    ]
    for kwargs, message in cases:
        code, details = code_of(lambda: decide(daemon, ["x"], [q], **kwargs))
        assert code == grpc.StatusCode.INVALID_ARGUMENT, details
        assert details == message, details
    # An accumulator of another shape than the call's listing is replaced,
    # not read: the call starts that listing afresh.
    odd = [carried(listing=listing, shifts=2, k=2, sum=[0.5] * 4, n=7)]
    reply = decide(daemon, ["x"], [q], carry_priors=True, priors=odd)
    assert [(p.listing, p.shifts, p.n) for p in reply.priors] == [(listing, 4, 1)]


@pytest.mark.parametrize("request_kwargs, field", [
    ({"questions": [choice(options=[f"o{i}" for i in range(27)])]}, "questions[0].options"),
    ({"questions": [choice(options=[])]}, "questions[0].options"),
    ({"questions": [choice(options=["only"])]}, "questions[0].options"),
    ({"questions": [choice(options=["a", "a"])]}, "questions[0].options"),
    ({"questions": [choice()], "level": "L3"}, "level"),
    ({"questions": [choice()], "require": "L9"}, "require"),
    ({"questions": [choice(labels=["A", "B", "C", "DD"])]}, "\"DD\""),
    ({"questions": [dpb.Question(kind="poll", text="?")]}, "questions[0].kind"),
    ({"questions": [dpb.Question(kind="score", text="?", bins=11)]}, "questions[0].bins"),
    ({"questions": []}, "questions"),
    ({"questions": [choice()], "options": dpb.DecideOptions(prior="uniform")}, "options.prior"),
])
def test_bad_decide_input(daemon, request_kwargs, field):
    kwargs = dict(level="L0")
    kwargs.update(request_kwargs)
    code, details = code_of(lambda: daemon.decisions.Decide(
        dpb.DecideRequest(states=states(["x"]), **kwargs), timeout=30))
    assert code == grpc.StatusCode.INVALID_ARGUMENT, details
    assert field in details, details


def test_invalid_utf8_text_is_refused_naming_the_field(daemon):
    # Text fields are strings: the request parse refuses invalid UTF-8 in
    # them by field path and byte offset, for Decide and Fit alike.
    decide_request = dpb.DecideRequest(states=states(["x"]), questions=[choice(text="Which?")],
                                       level="L0")
    fit_request = dpb.FitRequest(question=choice(), states=states(["one", "two"]),
                                 labels=[0, 1], level="L1")
    for method, payload, needle in [
            ("Decide", with_bytes(decide_request, b"Which?", b"Wh\xefch?"),
             "questions[0].text: invalid UTF-8 at byte offset 2"),
            ("Fit", with_bytes(fit_request, b"two", b"t\x80o"),
             "states[1].text: invalid UTF-8 at byte offset 1")]:
        code, details = code_of(lambda: raw_call(daemon, f"/mesa.anyjev.v1.Decisions/{method}",
                                                 payload))
        assert code == grpc.StatusCode.INVALID_ARGUMENT, details
        assert details.startswith(needle), details


def test_state_and_fit_limits(start_daemon):
    d = start_daemon("--set", "limits.max_decide_states=2", "--set",
                     "limits.max_decide_questions=1")
    code, details = code_of(lambda: decide(d, ["a", "b", "c"], [choice()]))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "limits.max_decide_states=2" in details
    code, details = code_of(lambda: decide(d, ["a"], [choice(), choice()]))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "limits.max_decide_questions=1" in details
    code, details = code_of(lambda: d.decisions.Decide(dpb.DecideRequest(questions=[choice()]),
                                                       timeout=10))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "states" in details
    code, details = code_of(lambda: d.decisions.Fit(dpb.FitRequest(
        question=choice(), states=states(["a"]), labels=[9], level="L1"), timeout=10))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "labels[0]" in details
    code, details = code_of(lambda: d.decisions.Fit(dpb.FitRequest(
        question=choice(), states=states(["a", "b"]), labels=[0, 1], level="L2"), timeout=10))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "max(8, 2K)" in details


def test_concurrent_decides_and_deadline(start_daemon):
    # No batch prior: with it, whichever call happens to be eighth is
    # debiased by the seven before it, so answers depend on arrival order.
    d = start_daemon("--set", "model.fake_delay_s=0.3", "--set", "decisions.prior=none")
    results, errors = [], []

    def worker(i):
        try:
            reply = decide(d, [f"item {i} about cells"], [choice()], level="L0", timeout=60)
            results.append(reply.decisions[0].answer)
        except grpc.RpcError as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and results == ["cells"] * 8
    # Health and Inference stay responsive while decisions wait on the model.
    assert d.health_status() == "SERVING"
    code, _ = code_of(lambda: decide(d, [f"s{i}" for i in range(40)], [choice()], timeout=0.1))
    assert code == grpc.StatusCode.DEADLINE_EXCEEDED


def test_auth_applies_to_decisions(start_daemon):
    d = start_daemon(env={"DECIDE_TOKEN": "s3cret"}, *("--set", "auth.token_env=DECIDE_TOKEN"))
    code, _ = code_of(lambda: decide(d, ["x"], [choice()]))
    assert code == grpc.StatusCode.UNAUTHENTICATED
    reply = d.decisions.Decide(dpb.DecideRequest(states=states(["x"]), questions=[choice()]),
                               metadata=[("authorization", "Bearer s3cret")], timeout=30)
    assert reply.decisions[0].level == "L0"


def list_questions(daemon, ids=(), timeout=10):
    return daemon.decisions.ListQuestions(dpb.ListQuestionsRequest(ids=list(ids)),
                                          timeout=timeout)


def test_list_questions_serves_the_cli_question_set(daemon):
    reply = list_questions(daemon)
    cli = run_cli("questions", "--json")
    assert cli.returncode == 0, cli.stderr
    want = json.loads(cli.stdout)
    assert reply.lock_sha == want["lock_sha"] and reply.model == "fake"
    assert [(q.question.id, q.key, q.scope, q.twin or None, len(q.question.options))
            for q in reply.questions] == [
        (w["id"], w["key"], w["scope"], w["twin"], 0 if w["kind"] == "noul" else w["k"])
        for w in want["questions"]]
    assert {q.level for q in reply.questions} == {"L0"}
    assert not any(q.HasField("bundle_version") for q in reply.questions)
    # The definition goes back into Decide as it is, and keeps its key.
    term, aspect = list_questions(daemon, ["term.fits", "column.aspect"]).questions
    assert (term.question.id, aspect.question.id) == ("term.fits", "column.aspect")
    decided = decide(daemon, ["A column of species names"], [term.question, aspect.question],
                     level="auto")
    assert [d.question_key for d in decided.decisions] == [term.key, aspect.key]
    assert [d.level for d in decided.decisions] == ["L0", "L0"]


def test_list_questions_shows_the_level_auto_serves(daemon):
    (keep,) = list_questions(daemon, ["avu.keep"]).questions
    texts = [f"An annotation, {'new' if i % 2 else 'redundant'} item {i}" for i in range(16)]
    labels = [i % 2 for i in range(16)]
    daemon.decisions.Fit(dpb.FitRequest(question=keep.question, states=states(texts),
                                        labels=labels, level="L1"), timeout=60)
    assert list_questions(daemon, ["avu.keep"]).questions[0].level == "L1"
    # A head fit on a rewording routes under auto, but not with exact_heads
    # (what the CLI sends): the listing says what the CLI would get.
    reworded = dpb.Question(kind="noul", text=keep.question.text + " Answer carefully.")
    daemon.decisions.Fit(dpb.FitRequest(question=reworded, states=states(texts),
                                        labels=labels, level="L2"), timeout=60)
    routed = decide(daemon, ["An annotation"], [keep.question], level="auto")
    assert routed.decisions[0].level == "L2" and routed.decisions[0].diagnostics.routed_from
    assert list_questions(daemon, ["avu.keep"]).questions[0].level == "L1"
    daemon.decisions.Fit(dpb.FitRequest(question=keep.question, states=states(texts),
                                        labels=labels, level="L2"), timeout=60)
    assert list_questions(daemon, ["avu.keep"]).questions[0].level == "L2"
    served = decide(daemon, ["An annotation"], [keep.question], level="auto",
                    options=dpb.DecideOptions(exact_heads=True))
    assert served.decisions[0].level == "L2"
    assert {q.level for q in list_questions(daemon).questions if q.question.id != "avu.keep"} \
        == {"L0"}


@pytest.mark.parametrize("ids, code, needle", [
    (["avu.keep", "term.fit"], grpc.StatusCode.NOT_FOUND,
     "ids[1]: no question with id 'term.fit' (did you mean 'term.fits'?)"),
    (["nothing.like.it"], grpc.StatusCode.NOT_FOUND, "ids[0]: no question with id 'nothing.like.it'"),
    ([""], grpc.StatusCode.INVALID_ARGUMENT, "ids[0]: 0 bytes; an id has 1..128"),
    (["x" * 129], grpc.StatusCode.INVALID_ARGUMENT, "ids[0]: 129 bytes; an id has 1..128"),
    (["avu.keep"] * 65, grpc.StatusCode.INVALID_ARGUMENT, "ids: 65 ids exceed 64"),
])
def test_list_questions_refuses_bad_ids(daemon, ids, code, needle):
    got, details = code_of(lambda: list_questions(daemon, ids))
    assert got == code and needle in details, details
    assert "did you mean" not in details or ids[-1] == "term.fit"
