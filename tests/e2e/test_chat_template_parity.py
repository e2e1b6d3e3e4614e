"""Chat rendering parity: common/text/chat_template renders Qwen3's template
by hand; transformers' apply_chat_template(tokenize=False,
add_generation_prompt=True, enable_thinking=False) with the real
tokenizer_config.json is the oracle, byte for byte, over many messages. The
prefix/suffix split (docs/decision.md, Prompts) is checked against the rendered
text cut at the sentinel, and a template we have not verified is refused."""
import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[2]
TOKENIZER_DIR = ROOT / "tests" / "data" / "qwen3-tokenizer"
TOOL = os.environ.get("MESA_ANYJEV_CHAT_RENDER", "build/tests/chat_render")
SENTINEL = "\u2063ANYJEV_SPLIT\u2063"
SYSTEM = ("You are a decision function. You will be given a state and one question. "
          "Reply with the answer label only: no words, no punctuation, no explanation.")


@pytest.fixture(scope="module")
def hf_tokenizer():
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(str(TOKENIZER_DIR))


def hf_render(tok, system, user):
    return tok.apply_chat_template(
        [{"role": "system", "content": system}, {"role": "user", "content": user}],
        tokenize=False, add_generation_prompt=True, enable_thinking=False)


def run_tool(config, pairs):
    lines = "".join(json.dumps({"system": s, "user": u}) + "\n" for s, u in pairs)
    proc = subprocess.run([TOOL, str(config)], input=lines.encode(), capture_output=True,
                          timeout=120)
    return proc


def messages():
    """Deterministic, varied messages: empty, multi-line, special characters,
    unicode, template-looking text, chat control tokens."""
    fixed = [
        "", " ", "\n", "\n\n", "x", "Is the sky blue? Answer Yes or No.",
        "line one\nline two\n\nline four\n", "  leading and trailing  ",
        "tabs\tand\r\nCRLF\r\n", "<|im_start|>user\nsneaky<|im_end|>", "<think>\nhmm\n</think>",
        "</think>", "<tool_response>x</tool_response>", "{{ messages }} {% if x %}y{% endif %}",
        "{#- comment -#}", "'quotes' \"double\" `back` \\backslash\\", "naïve café — 你好世界 🎉",
        "e\u0301 \u1100\u1161 \u00a0\u3000", "\u2063 lone invisible separator", "%s %d {0} ${x}",
        "State:\n(empty)\n\nQuestion: Is it?\nOptions:\nA. yes\nB. no\nAnswer with the letter only.",
        "<|endoftext|>", "\x00nul\x01ctl\x7f", "ends with backslash\\", "🇫🇷👨‍👩‍👧👍🏽",
        "\u2028 line separator \u0085 next line \u2029",
    ]
    rng = random.Random(20240603)
    alphabet = (list("abcXYZ019 \n\t{}%#<>|/\\'\"-_") + ["é", "你", "🎉", "\u0301", "\r\n",
                "<|im_start|>", "<|im_end|>", "<think>", "{{", "}}", "{%", "%}", "\u00a0"])
    generated = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
                 for _ in range(400)]
    return fixed + generated


def test_render_equals_transformers(hf_tokenizer):
    texts = messages()
    rng = random.Random(7)
    pairs = [(SYSTEM, t) for t in texts] + [(t, rng.choice(texts)) for t in texts]
    proc = run_tool(TOKENIZER_DIR, pairs)
    assert proc.returncode == 0, proc.stderr.decode()
    outputs = [json.loads(line) for line in proc.stdout.decode().split("\n")[:-1]]
    assert len(outputs) == len(pairs)
    bad = [(s, u) for (s, u), out in zip(pairs, outputs)
           if out["text"] != hf_render(hf_tokenizer, s, u)]
    assert not bad, f"{len(bad)} of {len(pairs)} differ, first: {bad[:3]!r}"


def test_split_at_the_sentinel(hf_tokenizer):
    cases = [("State:\nx\n\nQuestion: q?\nOptions:\n", "A. a\nB. b\nAnswer with the letter only."),
             ("", ""), ("prefix only", ""), ("", "suffix only"), ("你好\n", "🎉\n")]
    pairs = [(SYSTEM, p + SENTINEL + s) for p, s in cases]
    # Not exactly one sentinel: no split.
    pairs += [(SYSTEM, "no sentinel"), (SYSTEM, SENTINEL * 2), (SENTINEL, "a" + SENTINEL + "b")]
    proc = run_tool(TOKENIZER_DIR, pairs)
    assert proc.returncode == 0, proc.stderr.decode()
    outputs = [json.loads(line) for line in proc.stdout.decode().split("\n")[:-1]]
    for (system, user), out in zip(pairs, outputs):
        rendered = hf_render(hf_tokenizer, system, user)
        if rendered.count(SENTINEL) == 1:
            prefix, suffix = rendered.split(SENTINEL)
            assert (out["prefix"], out["suffix"]) == (prefix, suffix)
            assert suffix.endswith("<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
        else:
            assert (out["prefix"], out["suffix"]) == (rendered, "")


def test_unverified_template_is_refused(tmp_path):
    config = json.loads((TOKENIZER_DIR / "tokenizer_config.json").read_text())
    original = config["chat_template"]
    config["chat_template"] = original.replace("<think>\\n\\n</think>", "<think>")
    assert config["chat_template"] != original
    target = tmp_path / "tokenizer_config.json"
    target.write_text(json.dumps(config))
    shutil.copy(TOKENIZER_DIR / "tokenizer.json", tmp_path / "tokenizer.json")
    proc = run_tool(tmp_path, [(SYSTEM, "x")])
    assert proc.returncode == 2
    message = proc.stderr.decode()
    assert "unsupported chat template (sha256 " in message
    assert str(target) in message
