"""make bench-tokenizer: our BpeTokenizer (bench/tokenizer_bench, C++) against
Hugging Face tokenizers on the same corpora, in the same run, both on one
thread, with the real Qwen3 tokenizer.json. Prints tokens/s for each and the
ratio (ours / Hugging Face's best of an encode loop and encode_batch).

Corpora, all built from local files (nothing downloaded):
- english+code: /usr/share/common-licenses and the Python sources of the
  installed transformers package, cut into ~2 KB documents;
- multilingual: tests/e2e/tokenizer_corpus.py's generated strings (many
  scripts, emoji, combining marks, whitespace runs, special tokens).
The ids of both are compared in full first (through `mesa-anyjev
tokenize`): a benchmark of wrong output would mean nothing.
"""
import os

# Before tokenizers is imported: one thread, no rayon pool.
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from tokenizer_corpus import strings  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
import tokenizers  # noqa: E402


def english_and_code(limit_bytes):
    """~2 KB documents of English prose and Python source."""
    import transformers
    files = sorted(Path("/usr/share/common-licenses").glob("*"))
    files += sorted(Path(transformers.__file__).parent.rglob("*.py"))
    docs, total = [], 0
    for path in files:
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        doc = []
        for line in text.splitlines(keepends=True):
            doc.append(line)
            if sum(map(len, doc)) >= 2048:
                docs.append("".join(doc))
                total += len(docs[-1].encode())
                doc = []
        if doc:
            docs.append("".join(doc))
            total += len(docs[-1].encode())
        if total >= limit_bytes:
            break
    return docs


def time_hf(tok, docs, passes):
    """Best seconds per pass for an encode loop and for encode_batch."""
    def loop():
        for d in docs:
            tok.encode(d, add_special_tokens=False)

    def batch():
        tok.encode_batch(docs, add_special_tokens=False)

    results = {}
    for name, fn in (("loop", loop), ("batch", batch)):
        fn()  # warm-up: fills the BPE cache, as our cold pass does
        best = float("inf")
        for _ in range(passes):
            start = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - start)
        results[name] = best
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", default=str(ROOT / "build" / "bench" / "tokenizer_bench"))
    parser.add_argument("--cli", default=str(ROOT / "build" / "client" / "mesa-anyjev"))
    parser.add_argument("--tokenizer", default=str(ROOT / "tests" / "data" / "qwen3-tokenizer"))
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--english-mb", type=float, default=8.0)
    parser.add_argument("--multilingual-docs", type=int, default=10_500)
    args = parser.parse_args()

    tok = Tokenizer.from_file(str(Path(args.tokenizer) / "tokenizer.json"))
    corpora = {
        "english+code": english_and_code(int(args.english_mb * 1e6)),
        "multilingual": strings(n=args.multilingual_docs, seed=7),
    }
    print(f"tokenizers {tokenizers.__version__}, RAYON_NUM_THREADS=1, "
          f"best of {args.passes} passes after one warm-up pass")
    header = (f"{'corpus':<14} {'docs':>6} {'MB':>6} {'tokens':>9} {'ours tok/s':>11} "
              f"{'(cold)':>11} {'HF loop':>11} {'HF batch':>11} {'ratio':>6}")
    print(header)
    with tempfile.TemporaryDirectory() as tmp:
        for name, docs in corpora.items():
            path = Path(tmp) / f"{name}.jsonl"
            path.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
            ours = json.loads(subprocess.run(
                [args.bench, args.tokenizer, str(path), str(args.passes)],
                check=True, capture_output=True, text=True).stdout)
            theirs_ids = [e.ids for e in tok.encode_batch(docs, add_special_tokens=False)]
            n_tokens = sum(map(len, theirs_ids))
            cli = subprocess.run([args.cli, "tokenize", "--tokenizer", args.tokenizer],
                                 stdin=path.open("rb"), check=True, capture_output=True)
            ours_ids = [json.loads(line)["ids"] for line in cli.stdout.decode().split("\n")[:-1]]
            mismatches = sum(1 for a, b in zip(ours_ids, theirs_ids) if a != b)
            assert len(ours_ids) == len(docs) and mismatches == 0, (name, mismatches)
            assert ours["tokens"] == n_tokens, (name, ours["tokens"], n_tokens)
            hf = time_hf(tok, docs, args.passes)
            hf_loop, hf_batch = n_tokens / hf["loop"], n_tokens / hf["batch"]
            ratio = ours["tokens_per_s"] / max(hf_loop, hf_batch)
            print(f"{name:<14} {len(docs):>6} {ours['bytes'] / 1e6:>6.2f} {n_tokens:>9} "
                  f"{ours['tokens_per_s']:>11,.0f} {ours['cold_tokens_per_s']:>11,.0f} "
                  f"{hf_loop:>11,.0f} {hf_batch:>11,.0f} {ratio:>5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
