"""The anyjev 0.2.0 package as an oracle for common/decision: runs the same
JSON script tests/tools/decision_tool reads, through anyjev.Decider over
anyjev's own FakeBackend with the reference's content function, position bias
[0.6, 0.2, 0.0, -0.1] and temperature 0.7 (what the C++ fake model plants),
and hidden states read from the same tables."""
import hashlib
import json
import os
import re
import subprocess

import numpy as np
from anyjev import Decider, Question
from anyjev.backends.fake import FakeBackend
from anyjev.readout import build_prompt, render_chat_parts

TOOL = os.environ.get("MESA_ANYJEV_DECISION_TOOL", "build/tests/decision_tool")
POSITION_BIAS = [0.6, 0.2, 0.0, -0.1]
TEMPERATURE = 0.7
_STOP = {"label", "curie", "ontology", "id", "description", "synonyms", "has", "children", "true",
         "false"}


def hash_unit(text):
    return (int(hashlib.md5(text.encode("utf-8")).hexdigest()[:8], 16) % 1000) / 1000


def default_fake_content(state, option):
    """The reference's default_fake_content, exactly (common/fake_backend.h)."""
    s = state.lower()
    jitter = (hash_unit(state + "|" + option) - 0.5) * 0.4
    if option in ("Yes", "No"):
        cand = (re.search(r'"candidate":\s*\{(.*?)\}', s, re.S)
                or re.search(r'"term":\s*\{(.*?)\}', s, re.S))
        target = (re.search(r'"column":\s*\{(.*?)\}', s, re.S)
                  or re.search(r'"site":\s*\{(.*?)\}', s, re.S))
        if cand and target:
            cw = set(re.findall(r"[a-z0-9]+", cand.group(1))) - _STOP
            tw = set(re.findall(r"[a-z0-9]+", target.group(1)))
            score = 1.5 if cw & tw else -1.0
        else:
            score = 0.5 if '"identifier"' not in s else -1.5
        return (score if option == "Yes" else -score) + jitter
    head = option.split(":")[0].split(" ")[0].lower()
    return (1.0 if head and head in s else 0.0) + jitter


class TableFake(FakeBackend):
    """anyjev's fake with hidden states states[state][layer] +
    options[first displayed option][layer] in float32."""

    def __init__(self, hidden=None):
        super().__init__(default_fake_content, position_bias=POSITION_BIAS,
                         temperature=TEMPERATURE)
        hidden = hidden or {}
        self.table_states = hidden.get("states")
        self.table_options = hidden.get("options")
        self.recorded = {}

    def next_token_logprobs(self, prompts, token_ids):
        """The fake's logprobs, recorded by prompt text so the C++ side can be
        fed the very same numbers (label ids differ between the two fakes'
        tokenizers; values are in position order on both)."""
        out = super().next_token_logprobs(prompts, token_ids)
        for prompt, lp in zip(prompts, out):
            self.recorded[prompt] = [float(x) for x in lp]
        return out

    def hidden_states(self, prompts, layers=None, token_ids=None, positions=None):
        if self.table_states is None:
            return super().hidden_states(prompts, layers, token_ids, positions)
        layers = [self.n_layers] if layers is None else [
            (self.n_layers + 1 + i) if i < 0 else i for i in layers]
        feats = np.zeros((len(prompts), len(layers), self.hidden_size), dtype=np.float32)
        for i, prompt in enumerate(prompts):
            state, _, options = self._parse(prompt)
            for li, layer in enumerate(layers):
                feats[i, li] = (np.asarray(self.table_states[state][layer], dtype=np.float32)
                                + np.asarray(self.table_options[options[0]][layer],
                                             dtype=np.float32))
        return feats, [None] * len(prompts), None


def question(q):
    kind = q.get("kind", "choice")
    name = q.get("name") or None
    if kind == "choice":
        return Question.choice(q.get("text", ""), q["options"], name=name)
    if kind == "noul":
        return Question.noul(q.get("text", ""), name=name)
    if "levels" in q:
        return Question.score(q.get("text", ""), levels=q["levels"], name=name)
    return Question.score(q.get("text", ""), bins=q.get("bins", 5),
                          scale=tuple(q.get("scale", (0.0, 1.0))), name=name)


def _f(x):
    if x is None:
        return None
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    return x


def decision_json(d):
    g = d.diagnostics
    out = {"question_id": d.question.id, "key": d.question.key, "level": d.level,
           "probs": [float(p) for p in d.probs], "answer_index": int(np.argmax(d.probs)),
           "confidence": d.confidence, "permutations": g.get("permutations"),
           "perms": [list(map(int, p)) for p in g.get("perms", [])]}
    if d.question.kind == "score":
        out["value"] = d.value
    for key in ("answer_mass", "prior_method", "prior_strength", "order_flip_raw",
                "order_flip_l0", "temperature", "readout", "exit_layer", "reordered", "adapted",
                "adapt_n", "listing"):
        if key in g:
            out[key] = _f(g[key])
    if "raw_probs" in g:
        out["raw_probs"] = _f(g["raw_probs"])
    if "l0_probs" in g:
        out["l0_probs"] = _f(g["l0_probs"])
    if g.get("prior") is not None:
        out["prior"] = _f(np.asarray(g["prior"]))
    if "routed_from" in g:
        out["routed_from"] = g["routed_from"] or ""
    if g.get("adaptive"):
        out["shifts_used"] = g["shifts_used"]
        out["stop_threshold"] = _f(g["stop_threshold"])
    return out


OPTION_KEYS = ("prior", "min_prior_n", "prior_strength", "max_permutations", "combine",
               "record_content_free", "canonical_order", "adaptive_shifts",
               "adaptive_min_shifts", "adaptive_margin", "adaptive_stat", "adaptive_target",
               "adaptive_wave", "adaptive_order", "adapt", "adapt_min_n")


def run_oracle(script, record=None):
    """The script's ops through anyjev; the same result shapes as decision_tool.
    With `record` (a dict), every prompt's logprobs are stored in it."""
    backend = TableFake(script.get("hidden"))
    if record is not None:
        backend.recorded = record
    opts = {k: v for k, v in script.get("decider", {}).items() if k in OPTION_KEYS}
    d = Decider(backend, **opts)
    results = []
    for op in script["ops"]:
        try:
            results.append(_run_op(d, op))
        except Exception as e:  # noqa: BLE001 - the error is the result
            results.append({"error": {"type": type(e).__name__, "message": str(e)}})
    return results


def _run_op(d, op):
    name = op["op"]
    if name == "decide":
        qs = [question(q) for q in op["questions"]]
        decs = d._run(list(op["states"]), qs, op.get("level", "L0"))
        rows = [[decision_json(decs[(si, qi)]) for qi in range(len(qs))]
                for si in range(len(op["states"]))]
        if op.get("require"):
            for si in range(len(op["states"])):
                for qi in range(len(qs)):
                    decs[(si, qi)].require(op["require"])
        return rows
    if name == "calibrate":
        return d.calibrate(question(op["question"]), op["states"], op["labels"])
    if name == "fit_head":
        kwargs = {"listing": op.get("listing", "auto")}
        if "layers" in op:
            kwargs["layers"] = op["layers"]
        return _jsonable(d.fit_head(question(op["question"]), op["states"], op["labels"],
                                    **kwargs))
    if name == "observe":
        art = d.observe(question(op["question"]), op["state"], op["label"])
        return None if art is None else _jsonable(art)
    if name == "calibrate_adaptive":
        kwargs = {"target": op["target"]} if "target" in op else {}
        cert = d.calibrate_adaptive(question(op["question"]), op["states"], **kwargs)
        return {k: _f(v) for k, v in cert.items()}
    if name == "export":
        return _jsonable(d.export_artifacts(include_observations=op.get("observations", False)))
    if name == "load":
        return d.load_artifacts(json.loads(json.dumps(op["artifacts"])))
    if name == "load_artifact":
        d.load_artifact(question(op["question"]), op["artifact"])
        return True
    if name == "reset_prior":
        if "question" in op:
            d._running.pop(question(op["question"]).key, None)
        else:
            d._running.clear()
        return True
    if name == "key":
        q = question(op["question"])
        out = {"key": q.key, "id": q.id, "options": list(q.options)}
        if q.kind == "score":
            out["centers"] = q.bin_centers()
        return out
    if name == "prompt":
        q = question(op["question"])
        spec = build_prompt(op["state"], q, op["perm"], labels=op["labels"])
        pre, suf = render_chat_parts(op.get("hf_tokenizer") or d.backend.tokenizer, spec)
        return {"prefix": pre, "suffix": suf}
    raise ValueError(f"unknown op {name}")


def _jsonable(x):
    return json.loads(json.dumps(x, default=_f))


def run_both(script):
    """(tool results, oracle results): the oracle first, recording its
    logprobs, then the tool fed those logprobs by prompt text, so both read
    bit-identical inputs and any difference is the decision code's."""
    record = {}
    oracle = run_oracle(script, record)
    return run_tool(dict(script, logprobs=record)), oracle


def run_tool(script):
    proc = subprocess.run([TOOL], input=json.dumps(script), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["results"]
