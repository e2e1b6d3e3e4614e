"""Tokenizer parity: `mesa-anyjev tokenize` (common/text/bpe_tokenizer) gives
the ids Hugging Face tokenizers gives on the real Qwen3 tokenizer.json, over
10,000+ deterministic varied strings (tokenizer_corpus.py), and `--decode`
gives Hugging Face's decode(ids, skip_special_tokens=False), lossy bytes
included. All strings go through one CLI process as JSON lines. Also: the
fixed reference encodings below, and the CLI's handling of bad
lines (exit 2, the line number named, earlier lines written whole)."""
import json
import os
import random
import subprocess
from pathlib import Path

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")

from tokenizer_corpus import strings  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TOKENIZER_DIR = ROOT / "tests" / "data" / "qwen3-tokenizer"
CLI = os.environ.get("MESA_ANYJEV_CLI", "build/client/mesa-anyjev")

# Measured with an independent encoder (a transformers.js port) on this
# tokenizer.json, the decision method's label tokens among them.
REFERENCE = [
    (" Yes", [7414]), (" No", [2308]), ("A", [32]), (" A", [362]), ("Yes", [9454]),
    ("No", [2753]), ("B", [33]), ("Z", [57]), ("0", [15]), ("1", [16]), ("9", [24]),
    ("10", [16, 15]), (" 1", [220, 16]),
    ("Hello, my dog is cute", [9707, 11, 847, 5562, 374, 18838]),
    ("<|im_start|>", [151644]), ("<think>", [151667]), ("<|endoftext|>", [151643]),
    ("naïve café 你好世界 12345\n\n  end ",
     [3376, 37572, 586, 51950, 220, 108386, 99489, 220, 16, 17, 18, 19, 20, 271, 220, 835, 220]),
    ("don't I'LL go!!\r\n", [15007, 944, 358, 6, 4086, 728, 2928, 319]),
    ("<|im_start|>user\nhi<|im_end|>\n", [151644, 872, 198, 6023, 151645, 198]),
    ("hi there", [6023, 1052]),
    ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
     "Is the sky blue? Answer Yes or No.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
     [151644, 8948, 198, 2610, 525, 264, 10950, 17847, 13, 151645, 198, 151644, 872, 198, 3872,
      279, 12884, 6303, 30, 21806, 7414, 476, 2308, 13, 151645, 198, 151644, 77091, 198, 151667,
      271, 151668, 271]),
]


def cli(*args, stdin: bytes, timeout=300):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESA_ANYJEV_")}
    return subprocess.run([CLI, *args], input=stdin, capture_output=True, env=env,
                          timeout=timeout)


def split_lines(stdout: bytes):
    """JSON lines split on "\n" only: str.splitlines would also cut at
    U+0085 and U+2028, which JSON strings may hold unescaped."""
    text = stdout.decode()
    assert text == "" or text.endswith("\n")
    return text.split("\n")[:-1] if text else []


def encode_cli(texts):
    stdin = "".join(json.dumps({"text": t}) + "\n" for t in texts).encode()
    proc = cli("tokenize", "--tokenizer", str(TOKENIZER_DIR), stdin=stdin)
    assert proc.returncode == 0, proc.stderr.decode()
    lines = split_lines(proc.stdout)
    assert len(lines) == len(texts)
    return [json.loads(line)["ids"] for line in lines]


def decode_cli(id_lists):
    stdin = "".join(json.dumps({"ids": ids}) + "\n" for ids in id_lists).encode()
    proc = cli("tokenize", "--tokenizer", str(TOKENIZER_DIR), "--decode", stdin=stdin)
    assert proc.returncode == 0, proc.stderr.decode()
    lines = split_lines(proc.stdout)
    assert len(lines) == len(id_lists)
    return [json.loads(line)["text"] for line in lines]


@pytest.fixture(scope="module")
def hf():
    from tokenizers import Tokenizer
    return Tokenizer.from_file(str(TOKENIZER_DIR / "tokenizer.json"))


@pytest.fixture(scope="module")
def corpus():
    texts = strings()
    assert len(texts) >= 10_000
    return texts


def byte_level_char(b):
    """GPT-2's bytes_to_unicode: the character that spells byte `b`."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    if b in printable:
        return chr(b)
    return chr(256 + [x for x in range(256) if x not in printable].index(b))


def first_mismatches(texts, ours, theirs, limit=5):
    bad = [(t, a, b) for t, a, b in zip(texts, ours, theirs) if a != b]
    return len(bad), bad[:limit]


def test_reference_encodings(hf):
    texts = [t for t, _ in REFERENCE]
    ours = encode_cli(texts)
    for (text, ids), got in zip(REFERENCE, ours):
        assert got == ids, text
        assert hf.encode(text, add_special_tokens=False).ids == ids, text


def test_encode_matches_hf_tokenizers(hf, corpus):
    ours = encode_cli(corpus)
    theirs = [e.ids for e in hf.encode_batch(corpus, add_special_tokens=False)]
    n_bad, examples = first_mismatches(corpus, ours, theirs)
    assert n_bad == 0, f"{n_bad} of {len(corpus)} strings differ; first: {examples!r}"
    # The corpus is what it claims: long texts, many tokens, every special.
    assert max(len(t.encode()) for t in corpus) > 4000
    assert sum(map(len, ours)) > 300_000
    assert {151643, 151644, 151645, 151667, 151668} <= {i for ids in ours for i in ids}


def test_decode_matches_hf_and_round_trips(hf, corpus):
    ids = [e.ids for e in hf.encode_batch(corpus, add_special_tokens=False)]
    ours = decode_cli(ids)
    theirs = hf.decode_batch(ids, skip_special_tokens=False)
    n_bad, examples = first_mismatches(corpus, ours, theirs)
    assert n_bad == 0, f"{n_bad} decodes differ; first: {examples!r}"
    # Round trip up to normalization: text already in NFC comes back as is.
    normalizer = hf.normalizer
    same = sum(1 for t, d in zip(corpus, ours) if normalizer.normalize_str(t) == t and d == t)
    stable = sum(1 for t in corpus if normalizer.normalize_str(t) == t)
    assert same == stable


def test_decode_of_arbitrary_ids_is_lossy_like_hf(hf):
    # Random ids often cut multi-byte characters: each ill-formed stretch
    # becomes U+FFFD exactly as Hugging Face's from_utf8_lossy does.
    rng = random.Random(99)
    vocab = hf.get_vocab_size(with_added_tokens=True)
    byte_tokens = [hf.token_to_id(byte_level_char(b)) for b in range(0x80, 0x100)]
    id_lists = [[rng.randrange(vocab) if rng.random() < 0.6 else rng.choice(byte_tokens)
                 for _ in range(rng.randint(0, 30))] for _ in range(2000)]
    ours = decode_cli(id_lists)
    theirs = hf.decode_batch(id_lists, skip_special_tokens=False)
    n_bad, examples = first_mismatches(id_lists, ours, theirs)
    assert n_bad == 0, f"{n_bad} decodes differ; first: {examples!r}"
    assert any("\ufffd" in t for t in ours)


@pytest.mark.parametrize("lines,decode,line_no,reason", [
    (['{"text": "ok"}', 'not json'], False, 2, "not valid JSON"),
    (['{"text": "ok"}', '{"txt": "x"}'], False, 2, '"text"'),
    (['{"text": 5}'], False, 1, '"text"'),
    (['{"ids": [1, 2]}', '{"ids": [1, 151669]}'], True, 2, "151669"),
    (['{"ids": [-1]}'], True, 1, "-1"),
    (['{"ids": ["a"]}'], True, 1, "not a token id"),
    (['{"ids": [1]}', '', '{"ids": 3}'], True, 3, '"ids"'),
])
def test_bad_lines_stop_with_exit_2(lines, decode, line_no, reason):
    args = ["tokenize", "--tokenizer", str(TOKENIZER_DIR)] + (["--decode"] if decode else [])
    proc = cli(*args, stdin=("\n".join(lines) + "\n").encode())
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert f"line {line_no}" in err and reason in err, err
    # The good lines before the bad one are written whole, nothing after.
    good = [line for line in lines[:line_no - 1] if line.strip()]
    out = split_lines(proc.stdout)
    assert len(out) == len(good)
    for line in out:
        json.loads(line)


def test_invalid_utf8_on_stdin_is_a_bad_line():
    proc = cli("tokenize", "--tokenizer", str(TOKENIZER_DIR),
               stdin=b'{"text": "fine"}\n{"text": "bad \xff byte"}\n')
    assert proc.returncode == 2
    assert "line 2" in proc.stderr.decode()
    assert len(split_lines(proc.stdout)) == 1


def test_missing_tokenizer_is_a_usage_error(tmp_path):
    proc = cli("tokenize", "--tokenizer", str(tmp_path), stdin=b"")
    assert proc.returncode == 2
    assert "tokenizer.json" in proc.stderr.decode()
