"""The bench metrics (common/eval, docs/learning.md Metrics) against oracles: scikit-learn for accuracy, macro F1,
the K-class Brier score (summed over classes: scale_by_half=False) and log
loss; Python written here from those definitions for ECE (15 equal-mass bins,
numpy.array_split of the stable ascending confidence order), flip,
coverage at risk (first strict crossing, stable descending order) and AURC
(mean running risk). The C++ side runs as tests/tools/metrics_tool."""
import json
import os
import subprocess

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, brier_score_loss, f1_score, log_loss

TOOL = os.environ.get("MESA_ANYJEV_METRICS_TOOL", "build/tests/metrics_tool")


def run(cases):
    r = subprocess.run([TOOL], input=json.dumps({"cases": cases}), capture_output=True,
                       text=True, timeout=60, check=True)
    return json.loads(r.stdout)["results"]


def padded(probs):
    width = max(len(row) for row in probs)
    return np.array([list(row) + [0.0] * (width - len(row)) for row in probs])


def ece_oracle(p, y):
    conf = p.max(axis=1)
    right = (p.argmax(axis=1) == y).astype(float)
    order = np.argsort(conf, kind="stable")
    total = 0.0
    for chunk in np.array_split(order, 15):
        if len(chunk):
            total += len(chunk) / len(y) * abs(conf[chunk].mean() - right[chunk].mean())
    return total


def running_risk(p, y):
    order = np.argsort(-p.max(axis=1), kind="stable")
    wrong = (p.argmax(axis=1) != y)[order]
    return np.cumsum(wrong) / np.arange(1, len(y) + 1)


def coverage_oracle(p, y, r):
    risk = running_risk(p, y)
    over = np.nonzero(risk > r)[0]
    return 1.0 if len(over) == 0 else over[0] / len(y)  # (j - 1) / N, j 1-based


def random_case(rng, n, k, sharp):
    logits = rng.normal(size=(n, k)) * sharp
    y = rng.integers(0, k, size=n)
    logits[np.arange(n), y] += rng.normal(1.0, 1.0, size=n)  # some signal
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return p, y


CASES = [(7, 2, 1.0), (30, 2, 3.0), (200, 4, 1.5), (301, 8, 0.7), (2000, 3, 2.0),
         (14, 5, 0.3), (15, 2, 1.0), (1, 3, 1.0)]


@pytest.mark.parametrize("n,k,sharp", CASES)
def test_summary_matches_sklearn_and_spec_oracles(n, k, sharp):
    rng = np.random.default_rng(n * 31 + k)
    p, y = random_case(rng, n, k, sharp)
    # The reversed listing's probabilities mapped back: noisier copies.
    pf, _ = random_case(rng, n, k, sharp)
    pf = 0.5 * p + 0.5 * pf
    [got] = run([{"probs": p.tolist(), "labels": y.tolist(), "probs_flipped": pf.tolist(),
                  "risks": [0.05, 0.1, 0.3]}])
    labels = list(range(k))
    assert got["n"] == n
    assert got["acc"] == pytest.approx(accuracy_score(y, p.argmax(axis=1)), abs=1e-12)
    assert got["macro_f1"] == pytest.approx(
        f1_score(y, p.argmax(axis=1), average="macro", zero_division=0), abs=1e-12)
    assert got["brier"] == pytest.approx(
        brier_score_loss(y, p, labels=labels, scale_by_half=False), rel=1e-9)
    assert got["nll"] == pytest.approx(log_loss(y, p, labels=labels), rel=1e-9)
    assert got["ece"] == pytest.approx(ece_oracle(p, y), abs=1e-12)
    assert got["flip"] == pytest.approx(np.mean(p.argmax(axis=1) != pf.argmax(axis=1)))
    for r in (0.05, 0.1, 0.3):
        assert got["coverage"][f"{r:.6f}"] == pytest.approx(coverage_oracle(p, y, r))
    assert got["cov@5%"] == got["coverage"]["0.050000"]
    assert got["aurc"] == pytest.approx(running_risk(p, y).mean(), abs=1e-12)
    assert [c for c, _ in got["curve"]] == pytest.approx(np.arange(1, n + 1) / n)
    assert [r for _, r in got["curve"]] == pytest.approx(running_risk(p, y))
    # array_split sizes: N mod 15 bins one larger, first.
    sizes = [len(c) for c in np.array_split(np.arange(n), 15) if len(c)]
    assert [b[0] for b in got["bins"]] == sizes


def test_coverage_first_crossing_cases_of_the_spec():
    # Correct/wrong in descending confidence: confidences strictly decrease.
    def case(pattern):
        n = len(pattern)
        probs, labels = [], []
        for i, right in enumerate(pattern):
            c = 0.99 - 0.4 * i / n
            probs.append([c, 1 - c])
            labels.append(0 if right else 1)
        return {"probs": probs, "labels": labels, "risks": [0.05]}

    right_then_wrong = case([True, False] + [True] * 298)
    all_right = case([True] * 20)
    first_wrong = case([False] + [True] * 19)
    nineteen_then_one = case([True] * 19 + [False])
    got = run([right_then_wrong, all_right, first_wrong, nineteen_then_one])
    assert got[0]["cov@5%"] == pytest.approx(1 / 300)
    assert got[1]["cov@5%"] == 1.0
    assert got[2]["cov@5%"] == 0.0
    assert got[3]["cov@5%"] == 1.0  # e_20 = 0.05 is not > 0.05


def test_brier_extremes_and_nll_clip():
    got = run([{"probs": [[0.0, 1.0]], "labels": [0]},
               {"probs": [[0.05] * 20], "labels": [3]}])
    assert got[0]["brier"] == pytest.approx(2.0)  # confident and wrong
    assert got[0]["nll"] == pytest.approx(-np.log(1e-12))
    assert got[1]["brier"] == pytest.approx(0.95)  # uniform over K = 20


def test_ties_take_the_first_option_and_stable_order():
    probs = [[0.5, 0.5], [0.5, 0.5], [0.4, 0.6], [0.6, 0.4]]
    labels = [0, 1, 1, 0]
    [got] = run([{"probs": probs, "labels": labels, "risks": [0.05]}])
    p, y = np.array(probs), np.array(labels)
    assert got["acc"] == accuracy_score(y, p.argmax(axis=1)) == 0.75
    assert got["cov@5%"] == pytest.approx(coverage_oracle(p, y, 0.05))
    assert got["ece"] == pytest.approx(ece_oracle(p, y))


def test_rows_of_different_width_are_zero_padded():
    probs = [[0.2, 0.8], [0.1, 0.2, 0.7], [0.5, 0.25, 0.25, 0.0]]
    labels = [1, 0, 0]
    [got] = run([{"probs": probs, "labels": labels}])
    p = padded(probs)
    y = np.array(labels)
    assert got["brier"] == pytest.approx(
        brier_score_loss(y, p, labels=list(range(4)), scale_by_half=False))
    assert got["acc"] == pytest.approx(2 / 3)


@pytest.mark.parametrize("case,needle", [
    ({"probs": [], "labels": []}, "no items"),
    ({"probs": [[0.5, 0.5]], "labels": [0, 1]}, "1 probability rows but 2 labels"),
    ({"probs": [[0.5, 0.5]], "labels": [2]}, "labels[0]: 2 is outside [0, 2)"),
    ({"probs": [[0.5, -0.1]], "labels": [0]}, "probs[0]: probability -0.1"),
    ({"probs": [[0.5, 0.5], []], "labels": [0, 0]}, "probs[1]: an empty probability row"),
    ({"probs": [[0.5, 0.5]], "labels": [0], "probs_flipped": [[1.0]] * 2},
     "probs_flipped: 2 probability rows but 1 labels"),
])
def test_bad_input_is_refused_naming_the_field(case, needle):
    [got] = run([case])
    assert needle in got["error"]


# --- two models' agreement (common/eval/agreement.h, bench compare) ---------
# Oracles: scipy's binomtest for the Wilson interval, numpy.percentile, and a
# bootstrap written here with numpy's legacy RandomState(seed).randint(0, n,
# size=(resamples, n)): the same resamples the C++ draws, so the intervals
# must match to rounding.

def test_wilson_interval_matches_scipy():
    from scipy.stats import binomtest
    cases = [[0, 1], [0, 35], [1, 35], [3, 40], [20, 40], [40, 40], [7, 1000], [0, 285]]
    got = run([{"wilson": c} for c in cases])
    for (k, n), (lo, hi) in zip(cases, got):
        ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        assert (lo, hi) == pytest.approx((ci.low, ci.high), abs=1e-12), (k, n)


@pytest.mark.parametrize("q", [0, 2.5, 50, 95, 97.5, 100])
def test_percentile_is_numpys_linear(q):
    rng = np.random.default_rng(int(q * 10) + 1)
    for n in (1, 2, 7, 2000):
        values = rng.normal(size=n).tolist()
        [got] = run([{"percentile": [values, q]}])
        assert got == pytest.approx(np.percentile(values, q), abs=1e-12)


def bootstrap_oracle(pa, pb, y, resamples, seed):
    n = len(y)
    idx = np.random.RandomState(seed).randint(0, n, size=(resamples, n))

    def figures(p, pick):
        q, t = p[pick], y[pick]
        return (np.mean(q.argmax(axis=1) == t),
                -np.mean(np.log(np.maximum(q[np.arange(len(t)), t], 1e-12))),
                ece_oracle(q, t))

    diffs = np.array([np.subtract(figures(pa, r), figures(pb, r)) for r in idx])
    return [(np.percentile(diffs[:, m], 2.5), np.percentile(diffs[:, m], 97.5))
            for m in range(3)]


@pytest.mark.parametrize("n,k,seed,resamples", [(40, 2, 0, 500), (150, 4, 7, 300),
                                                (9, 3, 123, 200)])
def test_compare_models_matches_numpy_and_sklearn(n, k, seed, resamples):
    rng = np.random.default_rng(n + k)
    pa, y = random_case(rng, n, k, 1.5)
    noise, _ = random_case(rng, n, k, 1.5)
    pb = 0.7 * pa + 0.3 * noise  # a second model that mostly agrees
    [got] = run([{"compare": {"a": pa.tolist(), "b": pb.tolist(), "labels": y.tolist(),
                              "resamples": resamples, "seed": seed}}])
    flips = int(np.sum(pa.argmax(axis=1) != pb.argmax(axis=1)))
    assert got["n"] == n and got["flips"] == flips
    assert got["flip_rate"] == pytest.approx(flips / n, abs=1e-15)
    from scipy.stats import binomtest
    ci = binomtest(flips, n).proportion_ci(method="wilson")
    assert (got["flip_lo"], got["flip_hi"]) == pytest.approx((ci.low, ci.high), abs=1e-12)
    tv = 0.5 * np.abs(pa - pb).sum(axis=1)
    assert got["mean_abs_dp"] == pytest.approx(tv.mean(), abs=1e-12)
    assert got["p95_abs_dp"] == pytest.approx(np.percentile(tv, 95), abs=1e-12)
    for side, p in (("a", pa), ("b", pb)):
        assert got[side]["acc"] == pytest.approx(accuracy_score(y, p.argmax(axis=1)), abs=1e-12)
        assert got[side]["nll"] == pytest.approx(log_loss(y, p, labels=list(range(k))),
                                                 rel=1e-9)
        assert got[side]["ece"] == pytest.approx(ece_oracle(p, y), abs=1e-12)
    for name, (lo, hi) in zip(("acc", "nll", "ece"), bootstrap_oracle(pa, pb, y, resamples,
                                                                      seed)):
        assert got[name]["value"] == pytest.approx(got["a"][name] - got["b"][name], abs=1e-15)
        assert (got[name]["lo"], got[name]["hi"]) == pytest.approx((lo, hi), abs=1e-12), name


def test_compare_models_identical_and_refusals():
    p = [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]]
    [same] = run([{"compare": {"a": p, "b": p, "labels": [0, 1, 1], "resamples": 50,
                               "seed": 1}}])
    assert same["flips"] == 0 and same["mean_abs_dp"] == 0 and same["p95_abs_dp"] == 0
    assert all(same[m]["lo"] == same[m]["hi"] == 0 for m in ("acc", "nll", "ece"))
    bad = run([{"compare": {"a": p, "b": p[:2], "labels": [0, 1, 1], "resamples": 5,
                            "seed": 0}},
               {"compare": {"a": p, "b": p, "labels": [0, 1, 1], "resamples": 0, "seed": 0}},
               {"compare": {"a": p, "b": [[0.5, 0.5], [0.5, 0.5], [0.5, -1]],
                            "labels": [0, 1, 1], "resamples": 5, "seed": 0}}])
    assert "model a decided 3 states, model b 2" in bad[0]["error"]
    assert "resamples: 0 is below 1" in bad[1]["error"]
    assert bad[2]["error"].startswith("model b: probs[2]")
