"""Parity of common/decision with the anyjev 0.2.0 package (the oracle of
the decision method, docs/decision.md): the same scripts run through tests/tools/decision_tool
(C++, over the C++ fake model) and through anyjev.Decider (over anyjev's fake
with the same content function, bias and temperature); hidden states come
from the same arrays on both sides. Probabilities must agree within 1e-9,
temperatures within 1e-6 relative, heads must be the same choice (kind,
block, parameter), and heads files must load both ways. The fake's logprobs
are recorded on the anyjev side and fed to the C++ side by prompt text, so
both read bit-identical inputs (and a prompt rendered differently fails)."""
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
from anyjev import Question
from anyjev.calibrate.permute import spread_order
from anyjev.calibrate.posthoc import TemperatureScaler
from anyjev.calibrate.stopping import cp_upper
from anyjev.heads import _folds
from anyjev.readout import build_prompt, render_chat_parts, resolve_labels

from decision_oracle import question, run_both, run_oracle, run_tool

TEST_DATA = Path(os.environ.get("MESA_ANYJEV_TEST_DATA",
                                Path(__file__).resolve().parents[1] / "data"))
PROB_TOL = 1e-9
TOPICS = ["genes", "proteins", "cells", "viruses", "mice"]
WORST = {}  # figure -> worst difference seen, printed at the end


def note(figure, value):
    WORST[figure] = max(WORST.get(figure, 0.0), float(value))


@pytest.fixture(scope="module", autouse=True)
def report():
    yield
    print("\nparity figures (worst over the module):")
    for figure, value in sorted(WORST.items()):
        print(f"  {figure}: {value:.3g}")


def max_diff(a, b):
    return float(np.max(np.abs(np.asarray(a, dtype=float) - np.asarray(b, dtype=float))))


def check_decisions(tool_rows, oracle_rows, where):
    assert len(tool_rows) == len(oracle_rows), where
    for si, (ra, rb) in enumerate(zip(tool_rows, oracle_rows)):
        for qi, (a, b) in enumerate(zip(ra, rb)):
            at = f"{where} state {si} question {qi}"
            assert a["level"] == b["level"], at
            assert a["key"] == b["key"], at
            d = max_diff(a["probs"], b["probs"])
            # A temperature fit by golden section is exact only down to the
            # rounding of its NLL (numpy's SIMD exp/log against libm's): the
            # two fits land within ~1e-8 of each other, and a probability
            # moves by at most 4 |d log T| for it (q |log q - E log q|).
            # Decisions from the same artifact get no such allowance.
            tol = PROB_TOL
            if b.get("temperature") is not None and a["temperature"] != b["temperature"]:
                tol += 4 * abs(math.log(a["temperature"] / b["temperature"]))
                note("probabilities after independent temperature fits (abs)", d)
            else:
                note("probabilities (abs)", d)
            assert d <= tol, (at, a["probs"], b["probs"], tol)
            assert a["answer_index"] == b["answer_index"], at
            for key in ("prior_method", "permutations", "perms", "readout", "exit_layer",
                        "reordered", "adapted", "adapt_n", "routed_from", "listing",
                        "shifts_used"):
                if key in b:
                    assert a.get(key) == b[key], (at, key, a.get(key), b[key])
            for key in ("answer_mass", "prior_strength", "order_flip_raw", "order_flip_l0",
                        "value", "stop_threshold"):
                if b.get(key) is not None:
                    assert a[key] == pytest.approx(b[key], abs=1e-9), (at, key)
            if "raw_probs" in b:
                assert max_diff(a["raw_probs"], b["raw_probs"]) <= PROB_TOL, at
            if "l0_probs" in b:
                d0 = max_diff(a["l0_probs"], b["l0_probs"])
                note("probabilities (abs)", d0)
                assert d0 <= PROB_TOL, at
            if b.get("prior") is not None:
                d = max_diff(a["prior"], b["prior"])
                note("priors (abs)", d)
                assert d <= PROB_TOL, at
            if b.get("temperature") is not None:
                rel = abs(a["temperature"] / b["temperature"] - 1)
                note("temperatures (relative)", rel)
                assert rel <= 1e-6, at


def check_artifact(a, b, where):
    """An L1 artifact or a heads-file entry: same choice, same numbers."""
    assert a.get("method") == b.get("method"), where
    rel = abs(a["temperature"] / b["temperature"] - 1)
    note("temperatures (relative)", rel)
    assert rel <= 1e-6, (where, a["temperature"], b["temperature"])
    if a["method"].startswith("head:"):
        assert (a["layer_abs"], a["layer"], a["params"]) == (b["layer_abs"], b["layer"],
                                                            b["params"]), where
        for key in ("question", "question_id", "kind", "text", "options", "n_blocks",
                    "hidden_size", "n_calib", "model"):
            assert a[key] == b[key], (where, key)
        note("head oof_nll (abs)", abs(a["cv"]["oof_nll"] - b["cv"]["oof_nll"]))
        assert a["cv"]["oof_nll"] == pytest.approx(b["cv"]["oof_nll"], abs=1e-9), where
        assert a["cv"]["oof_acc"] == b["cv"]["oof_acc"], where
        for key in ("W", "mean", "scale"):
            wa, wb = decode(a[key]), decode(b[key])
            assert wa.shape == wb.shape
            note(f"head {key} (float32, relative)",
                 max_diff(wa, wb) / max(1e-30, float(np.max(np.abs(wb)))))
            assert np.allclose(wa, wb, rtol=1e-5, atol=1e-6), (where, key)
        assert np.allclose(a["b"], b["b"], rtol=1e-5, atol=1e-6), where
    else:
        for key in ("prior_method", "prior_strength", "n_calib", "model", "question"):
            assert a.get(key) == b.get(key), (where, key)
        if b.get("prior") is not None:
            assert max_diff(a["prior"], b["prior"]) <= PROB_TOL, where


def decode(x):
    from anyjev.heads import decode_array
    return decode_array(x)


def both(script):
    return run_both(script)


def failed(result):
    return isinstance(result, dict) and "error" in result


# ---------------------------------------------------------------- identities

QUESTIONS = [
    {"kind": "choice", "text": "What is it about?", "options": ["genes", "proteins", "cells"]},
    {"kind": "choice", "text": 'Quote " back\\slash\nnew\ttab \x01 \u00e9 \u4f60\u597d \U0001f642',
     "options": ["a", "B", "\u00e7", "\u2028x"], "name": "odd"},
    {"kind": "noul", "text": "Is the sky blue?"},
    {"kind": "score", "text": "How big?", "bins": 4},
    {"kind": "score", "text": "How big?", "bins": 3, "scale": [-1.5, 2.25]},
    {"kind": "score", "text": "Tiny", "bins": 7, "scale": [0, 1e-5]},
    {"kind": "score", "text": "Huge", "bins": 10, "scale": [0, 1e7]},
    {"kind": "score", "text": "Odd", "bins": 6, "scale": [0.1, 0.7]},
    {"kind": "score", "text": "Quality?", "levels": ["bad", "ok", "good"]},
]


def test_question_keys_options_and_centers():
    script = {"ops": [{"op": "key", "question": q} for q in QUESTIONS]}
    tool, oracle = both(script)
    for q, a, b in zip(QUESTIONS, tool, oracle):
        assert a == b, q


@pytest.fixture(scope="module")
def hf_tokenizer():
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(str(TEST_DATA / "qwen3-tokenizer"))


@pytest.mark.parametrize("template", ["none", "qwen3"])
def test_prompts_render_and_split_alike(template, hf_tokenizer):
    ops, want = [], []
    for q in QUESTIONS:
        pq = question(q)
        labels = resolve_labels(hf_tokenizer, pq)[0]
        k = len(pq.options)
        perms = [list(range(k)), [(j + 1) % k for j in range(k)]]
        for state in ("The sky is blue today.", "", "multi\nline\n\nstate {\"a\": 1}"):
            for perm in perms:
                ops.append({"op": "prompt", "question": q, "state": state, "perm": perm,
                            "labels": labels, "template": template})
                spec = build_prompt(state, pq, perm, labels=labels)

                class NoTemplate:
                    chat_template = None
                tok = hf_tokenizer if template == "qwen3" else NoTemplate()
                pre, suf = render_chat_parts(tok, spec)
                want.append({"prefix": pre, "suffix": suf})
    got = run_tool({"ops": ops})
    assert got == want


def test_labels_on_the_qwen3_tokenizer(hf_tokenizer):
    qs = ([{"kind": "choice", "text": "q", "options": [f"o{i}" for i in range(k)]}
           for k in range(2, 27)])
    qs = list(qs) + [{"kind": "noul", "text": "q"}] + [
        {"kind": "score", "text": "q", "bins": k} for k in range(2, 11)]
    path = str(TEST_DATA / "qwen3-tokenizer" / "tokenizer.json")
    got = run_tool({"ops": [{"op": "labels", "question": q, "tokenizer": path} for q in qs]})
    for q, g in zip(qs, got):
        labels, ids = resolve_labels(hf_tokenizer, question(q))
        assert g == {"labels": labels, "ids": ids}, q


def test_numeric_building_blocks():
    rng = np.random.RandomState(5)
    ops, want = [], []
    for n, k in [(1, 2), (5, 3), (40, 4), (300, 20)]:
        probs = rng.dirichlet(np.ones(k) * 0.7, size=n)
        labels = rng.randint(0, k, size=n).tolist()
        ops.append({"op": "temperature", "probs": probs.tolist(), "labels": labels})
        want.append(TemperatureScaler.fit(probs, labels).temperature)
    for probs, labels in [([[0.5, 0.5]], [0]), ([[0.7, 0.3]], [0]), ([[0.7, 0.3]], [1]),
                          ([[0.75, 0.25]] * 3 + [[0.25, 0.75]], [0, 0, 0, 0])]:
        ops.append({"op": "temperature", "probs": probs, "labels": labels})
        want.append(TemperatureScaler.fit(np.asarray(probs), labels).temperature)
    got = run_tool({"ops": ops})
    for g, w in zip(got, want):
        note("temperatures (relative)", abs(g / w - 1))
        assert g == pytest.approx(w, rel=1e-12)

    cases = [(0, 24), (0, 100), (0, 300), (1, 300), (2, 300), (3, 50), (7, 10), (10, 10)]
    got = run_tool({"ops": [{"op": "cp_upper", "k": k, "n": n} for k, n in cases]})
    for (k, n), g in zip(cases, got):
        assert g == pytest.approx(cp_upper(k, n), abs=1e-13), (k, n)

    got = run_tool({"ops": [{"op": "spread_order", "k": k} for k in range(1, 41)]})
    assert got == [spread_order(k) for k in range(1, 41)]

    sizes = [1, 3, 8, 10, 20, 30, 57, 300, 1000]
    got = run_tool({"ops": [{"op": "folds", "n": n} for n in sizes]})
    assert got == [[f.tolist() for f in _folds(n, 5, 0)] for n in sizes]

    got = run_tool({"ops": [{"op": "permutation", "n": k, "count": 7, "seed": 0}
                            for k in (2, 4, 5, 8, 26, 300)]})
    for k, g in zip((2, 4, 5, 8, 26, 300), got):
        r = np.random.RandomState(0)
        assert g == [r.permutation(k).tolist() for _ in range(7)]

    got = run_tool({"ops": [{"op": "candidates", "n": n} for n in range(1, 81)]})
    assert got == [sorted({max(1, int(round(f * n))) for f in (0.5, 0.6, 0.7, 0.85, 1.0)})
                   for n in range(1, 81)]


# ---------------------------------------------------------------- decisions

def topic_states(n, tag="s"):
    """States naming one topic, another, or none (content then is jitter)."""
    out = []
    for i in range(n):
        if i % 3 == 0:
            out.append(f"Record {tag}{i} of a survey")
        else:
            out.append(f"A study of {TOPICS[i % 5]} ({tag}{i}), with {TOPICS[(i * 2) % 5]}")
    return out


CHOICE = {"kind": "choice", "text": "What is it about?", "options": TOPICS, "name": "topic"}
CHOICE3 = {"kind": "choice", "text": "Which one?", "options": TOPICS[:3]}
NOUL = {"kind": "noul", "text": "Is it about genes?"}
SCORE = {"kind": "score", "text": "How big?", "bins": 4}
LEVELS = {"kind": "score", "text": "Quality?", "levels": ["bad", "ok", "good"]}

DECIDER_SETTINGS = [
    {},
    {"prior": "content_free"},
    {"prior": "none", "combine": "mean"},
    {"canonical_order": True, "max_permutations": 3},
    {"prior_strength": 0.4, "min_prior_n": 5, "record_content_free": True},
    {"adaptive_shifts": True},
    {"adaptive_shifts": True, "adaptive_stat": "prob", "adaptive_wave": 1,
     "adaptive_order": "consecutive", "canonical_order": True},
    {"adaptive_shifts": True, "adaptive_margin": 1.5, "prior": "content_free"},
]


@pytest.mark.parametrize("settings", DECIDER_SETTINGS, ids=lambda s: json.dumps(s))
def test_decide_sequences(settings):
    s = topic_states(40)
    labels = [max(range(5), key=lambda o: (TOPICS[o] in t, -o)) for t in s]
    ops = [
        {"op": "decide", "states": s[:3], "questions": [CHOICE, NOUL, SCORE, LEVELS],
         "level": "raw"},
        {"op": "decide", "states": s[:5], "questions": [CHOICE, CHOICE3, NOUL, SCORE, LEVELS],
         "level": "L0"},
        {"op": "decide", "states": s[5:12], "questions": [CHOICE, NOUL], "level": "L0"},
        {"op": "calibrate", "question": CHOICE, "states": s[:30], "labels": labels[:30]},
        {"op": "calibrate", "question": NOUL, "states": s[:20],
         "labels": [0 if "genes" in t else 1 for t in s[:20]]},
        {"op": "decide", "states": s[30:], "questions": [CHOICE, NOUL], "level": "L1"},
        {"op": "decide", "states": s[30:], "questions": [CHOICE, CHOICE3, NOUL, SCORE],
         "level": "auto"},
        {"op": "reset_prior", "question": CHOICE},
        {"op": "decide", "states": s[12:20], "questions": [CHOICE], "level": "L0"},
        {"op": "export"},
    ]
    if settings.get("adaptive_shifts"):
        ops[7:7] = [{"op": "calibrate_adaptive", "question": CHOICE, "states": s[:30],
                     "target": 0.2},
                    {"op": "decide", "states": s[20:30], "questions": [CHOICE], "level": "L0"}]
    script = {"decider": settings, "ops": ops}
    tool, oracle = both(script)
    for i, (op, a, b) in enumerate(zip(ops, tool, oracle)):
        where = f"op {i} {op['op']}"
        assert not failed(a) and not failed(b), (where, a, b)
        if op["op"] == "decide":
            check_decisions(a, b, where)
        elif op["op"] == "calibrate":
            check_artifact(a, b, where)
        elif op["op"] == "calibrate_adaptive":
            assert a["threshold"] == b["threshold"], where
            if b["threshold"] is not None:
                assert (a["disagreements"], a["max_shifts"]) == (b["disagreements"],
                                                                 b["max_shifts"])
                assert a["mean_shifts"] == pytest.approx(b["mean_shifts"])
                assert a["bound"] == pytest.approx(b["bound"], abs=1e-12)
        elif op["op"] == "export":
            assert set(a["artifacts"]) == set(b["artifacts"])
            for key in b["artifacts"]:
                check_artifact(a["artifacts"][key], b["artifacts"][key], f"{where} {key}")


# ---------------------------------------------------------------- L2

def hidden_tables(states, labels, k, dims=64, noise=1.6, seed=3):
    """Class means scaled with depth, plus noise, plus a small offset of the
    first option shown, so the listing matters a little."""
    rng = np.random.RandomState(seed)
    mu = rng.randn(k, dims)
    table = {s: [((layer / 4) * mu[y] + rng.randn(dims) * noise).astype(np.float32).tolist()
                 for layer in range(5)] for s, y in zip(states, labels)}
    offsets = {o: [(rng.randn(dims) * 0.3).astype(np.float32).tolist() for _ in range(5)]
               for o in TOPICS + ["Yes", "No"]}
    return {"states": table, "options": offsets}


def l2_script(n=90, seed=3):
    rng = np.random.RandomState(seed)
    s = [f"Case {i}: a record" for i in range(n)]
    y = rng.randint(0, 5, size=n).tolist()
    return s, y, hidden_tables(s, y, 5, seed=seed)


def test_heads_fit_choose_and_decide_alike():
    s, y, hidden = l2_script()
    reworded = dict(CHOICE, text="Which topic is this?", name="")
    relisted = dict(CHOICE, options=list(reversed(TOPICS)), name="")
    noul_y = [int(v % 2) for v in y]
    ops = [
        {"op": "fit_head", "question": CHOICE, "states": s[:60], "labels": y[:60]},
        {"op": "fit_head", "question": CHOICE3 | {"options": TOPICS}, "states": s[:60],
         "labels": y[:60], "listing": "canonical", "layers": [1, -2, -1]},
        {"op": "fit_head", "question": NOUL, "states": s[:40], "labels": noul_y[:40]},
        {"op": "decide", "states": s[60:], "questions": [CHOICE, NOUL], "level": "L2"},
        {"op": "decide", "states": s[60:75], "questions": [reworded], "level": "L2"},
        {"op": "decide", "states": s[75:], "questions": [reworded], "level": "L2"},
        {"op": "decide", "states": s[:40], "questions": [relisted], "level": "auto"},
        {"op": "decide", "states": s[60:], "questions": [CHOICE, CHOICE3, NOUL],
         "level": "auto"},
        {"op": "export"},
    ]
    tool, oracle = both({"hidden": hidden, "ops": ops})
    for i, (op, a, b) in enumerate(zip(ops, tool, oracle)):
        where = f"op {i} {op['op']}"
        assert not failed(a) and not failed(b), (where, a, b)
        if op["op"] == "fit_head":
            check_artifact(a, b, where)
        elif op["op"] == "decide":
            check_decisions(a, b, where)
    exported_a, exported_b = tool[-1], oracle[-1]
    assert exported_a["heads"].keys() == exported_b["heads"].keys()
    for key in exported_b["heads"]:
        check_artifact(exported_a["heads"][key], exported_b["heads"][key], key)
    # The reworded question was adapted label-free after 30 states.
    assert tool[5][-1][0]["adapted"] and tool[5][-1][0]["adapt_n"] == 30
    # Both kinds were in play: the choice is the package's, whichever won.
    assert {a["method"] for a in tool[:3]} <= {"head:lda", "head:ridge"}


def test_observe_fits_at_the_same_counts():
    s, y, hidden = l2_script(n=64, seed=4)
    ops = [{"op": "observe", "question": CHOICE, "state": st, "label": lab}
           for st, lab in zip(s, y)] + [{"op": "export", "observations": True}]
    tool, oracle = both({"hidden": hidden, "ops": ops})
    fits = [i + 1 for i, r in enumerate(tool[:-1]) if r is not None]
    assert fits == [i + 1 for i, r in enumerate(oracle[:-1]) if r is not None] == [30, 60]
    for i in (29, 59):
        check_artifact(tool[i], oracle[i], f"observe {i + 1}")
    assert tool[-1]["observations"] == oracle[-1]["observations"]


def test_heads_files_load_both_ways():
    s, y, hidden = l2_script(seed=6)
    reworded = dict(CHOICE, text="Which topic is this?", name="")
    train = [
        {"op": "calibrate", "question": CHOICE, "states": s[:30], "labels": y[:30]},
        {"op": "fit_head", "question": CHOICE, "states": s[:60], "labels": y[:60]},
        {"op": "decide", "states": s[:35], "questions": [reworded], "level": "L2"},
        {"op": "export", "observations": False},
    ]
    use = [
        {"op": "decide", "states": s[60:], "questions": [CHOICE, reworded], "level": "L2"},
        {"op": "decide", "states": s[60:], "questions": [CHOICE], "level": "L1"},
    ]
    from_tool = run_tool({"hidden": hidden, "ops": train})[-1]
    from_oracle = run_oracle({"hidden": hidden, "ops": train})[-1]
    assert "adaptation" in from_tool and "adaptation" in from_oracle
    # Each side loads the other's file (and its own) and decides the same.
    for name, file in (("C++ file", from_tool), ("anyjev file", from_oracle)):
        script = {"hidden": hidden, "ops": [{"op": "load", "artifacts": file}] + use}
        tool, oracle = both(script)
        assert tool[0] == oracle[0] == 2, name
        for i in (1, 2):
            check_decisions(tool[i], oracle[i], f"{name} op {i}")
    # Files written by both sides carry the same arrays, bit for bit.
    for key in from_oracle["heads"]:
        for arr in ("W", "mean", "scale"):
            assert from_tool["heads"][key][arr] == from_oracle["heads"][key][arr], arr
    for key in from_oracle["adaptation"]:
        for arr in ("sum", "sumsq"):
            got = decode(from_tool["adaptation"][key][arr])
            want = decode(from_oracle["adaptation"][key][arr])
            assert np.allclose(got, want, rtol=1e-6), arr


def test_refusals_agree():
    s, y, hidden = l2_script(seed=7)
    other = dict(CHOICE, options=list(reversed(TOPICS)))
    ops = [
        {"op": "calibrate", "question": CHOICE, "states": s[:10], "labels": y[:10]},
        {"op": "export"},
    ]
    exported = run_tool({"hidden": hidden, "ops": ops})[-1]
    art = exported["artifacts"][question(CHOICE).key]
    foreign = dict(exported, model="Qwen/Qwen3-8B")
    checks = [
        {"op": "load", "artifacts": foreign},
        {"op": "load_artifact", "question": other, "artifact": art},
        {"op": "load_artifact", "question": CHOICE, "artifact": dict(art, model="other")},
        {"op": "load_artifact", "question": CHOICE, "artifact": dict(art, method="binning")},
        {"op": "load_artifact", "question": CHOICE, "artifact": art},
        {"op": "fit_head", "question": CHOICE, "states": s[:5], "labels": y[:5]},
    ]
    tool, oracle = both({"hidden": hidden, "ops": checks})
    for op, a, b in zip(checks, tool, oracle):
        assert failed(a) == failed(b), (op["op"], a, b)
    assert tool[4] is True and oracle[4] is True
    assert math.isfinite(art["temperature"])


def test_the_cpp_fake_model_reads_like_anyjevs_fake():
    """Without recorded logprobs the tool runs the daemon's own fake model;
    its readouts equal anyjev's fake with the reference content function."""
    s = topic_states(12, tag="f") + ['{"term": {"label": "cell line"}, "column": {"name": '
                                     '"cell"}}', "an \"identifier\" here", ""]
    script = {"ops": [
        {"op": "decide", "states": s, "questions": [CHOICE, NOUL, SCORE], "level": "raw"},
        {"op": "decide", "states": s, "questions": [CHOICE, NOUL, SCORE], "level": "L0"},
    ]}
    tool, oracle = run_tool(script), run_oracle(script)
    for i in range(2):
        for ra, rb in zip(tool[i], oracle[i]):
            for a, b in zip(ra, rb):
                d = max_diff(a["probs"], b["probs"])
                note("C++ fake against anyjev fake (abs)", d)
                assert d <= 1e-12
                assert a["answer_mass"] == pytest.approx(b["answer_mass"], abs=1e-12)
