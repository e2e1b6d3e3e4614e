"""make bench-before-after BEFORE=DIR: bench-engine's rows for two builds of
the engine side by side in one run (a change that should change no speed,
such as a reshaping, shows it here). DIR is the build directory of the
other tree (its tests/qwen3_dump and server/mesa-anyjevd); the peer rows
(transformers) are measured again beside each build, so each build's ratio
is its own and the two ratios compare. The rounds alternate the builds'
order. With --annotation, the annotation workload through each build's
daemon once (its own median of 3 rounds; ours only: the anyjev peer does
not change between builds).

First, the same bytes: both builds' qwen3_dump answer one request (prompts
of 1 to 300 tokens, several sharing a 200-token prefix; hidden states at
every layer, label logprobs, top 10) under each attention x cpu_gemm x
threads setting, and the answers must be equal byte for byte (cpu_gemm
auto is left out: it picks its GEMM by timing, per process). Then one
table: per row, each build's ratio to its peer (median and spread over the
rounds) and after / before."""
import argparse
import json
import os
import statistics
import subprocess
from pathlib import Path

import numpy as np

import torch
from transformers import Qwen3ForCausalLM

import annotation_workload
from bench_engine import Ours, compare, keep_freed_memory


def same_bytes(dumps, directory, layers):
    """Both builds' answers to one request, per setting: True when equal."""
    rng = np.random.default_rng(34)
    shared = rng.integers(0, 151000, size=200).tolist()
    prompts = [rng.integers(0, 151000, size=n).tolist() for n in (1, 3, 17, 40, 9, 300)]
    prompts += [shared + rng.integers(0, 151000, size=n).tolist() for n in (1, 5, 24)]
    request = {"prompts": prompts, "layers": list(range(layers + 1)),
               "label_ids": [32, 362, 9454, 151643], "top_k": 10}
    verdicts = {}
    for attention in ("eager", "sdpa"):
        for gemm in ("aten", "onednn"):
            for threads in (1, 2):
                answers = []
                for dump in dumps:
                    out = subprocess.run([dump, str(directory), "float32", attention, "cpu", gemm],
                                         input=json.dumps({**request, "threads": threads}),
                                         capture_output=True, text=True, timeout=600)
                    if out.returncode != 0:
                        raise RuntimeError(out.stderr)
                    answer = json.loads(out.stdout)
                    answers.append(json.dumps([answer[k] for k in ("hidden", "label_logprobs",
                                                                   "top")]))
                verdicts[f"{attention}, cpu_gemm {gemm}, {threads} threads"] = \
                    answers[0] == answers[1]
    return verdicts


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="the other tree's build directory")
    ap.add_argument("--after", default="build", help="this tree's build directory")
    ap.add_argument("--work", default="/tmp/mesa-anyjev-bench-engine")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--annotation", action="store_true",
                    help="also the annotation workload through each build's daemon")
    args = ap.parse_args()
    keep_freed_memory()
    torch.set_num_threads(args.threads)
    directory = annotation_workload.checkpoint(args.work, args.layers, args.hidden)
    model = Qwen3ForCausalLM.from_pretrained(directory, dtype=torch.float32,
                                             attn_implementation="sdpa").eval()
    builds = {}
    for name, build in (("before", Path(args.before)), ("after", Path(args.after))):
        dump = str((build / "tests" / "qwen3_dump").resolve())
        builds[name] = {"ours": Ours(dump, directory, args.threads, "sdpa", "auto"),
                        "aten": Ours(dump, directory, args.threads, "sdpa", "aten"),
                        "daemon": str((build / "server" / "mesa-anyjevd").resolve())}
    for setting, same in same_bytes([b["ours"].dump for b in builds.values()], directory,
                                    args.layers).items():
        print(f"  same bytes before and after, {setting}: {'yes' if same else 'NO'}",
              flush=True)
    ratios = {name: {} for name in builds}  # build -> row -> [ratio per round]
    for r in range(args.rounds):
        order = list(builds) if r % 2 == 0 else list(reversed(builds))
        for name in order:
            rows, _ = compare(model, builds[name]["ours"], args.layers,
                              aten_peer=builds[name]["aten"], seed=r)
            for row in rows:
                ratios[name].setdefault(row[0], []).append(row[3])
            print(f"  round {r + 1}, {name}: " +
                  ", ".join(f"{row[3]:.2f}" for row in rows), flush=True)
    annotation = {}
    if args.annotation:
        del model
        import conftest
        for name in builds:  # its own 3 rounds each, on new states
            conftest.DAEMON = builds[name]["daemon"]
            _, facts, figures = annotation_workload.run(
                directory, ["--set", "model.cpu_gemm=auto"], args.threads, peer=False)
            annotation[name] = figures
            print(f"  {name}: " + "; ".join(facts), flush=True)

    print(f"\nQwen3 {args.layers} blocks x hidden {args.hidden}, float32, sdpa, "
          f"{args.threads} threads, torch {torch.__version__}; before {args.before}, "
          f"after {args.after}; {args.rounds} rounds, medians (spread)\n")
    print("| row | before: ratio to peer | after: ratio to peer | after / before |")
    print("|---|---|---|---|")
    for row in ratios["after"]:
        b, a = ratios["before"].get(row), ratios["after"][row]
        if not b:
            continue
        mb, ma = statistics.median(b), statistics.median(a)
        print(f"| {row} | {mb:.2f} ({min(b):.2f}-{max(b):.2f}) | "
              f"{ma:.2f} ({min(a):.2f}-{max(a):.2f}) | {ma / mb:.2f} |")
    if annotation:
        b, a = annotation["before"], annotation["after"]
        print(f"| annotation workload through Decide, ours (seconds, median of 3; lower is "
              f"better) | {b['seconds']:.1f} | {a['seconds']:.1f} | "
              f"{a['seconds'] / b['seconds']:.2f} |")
        print(f"| annotation: passes, tokens computed | {b['passes']:.0f}, {b['tokens']:.0f} | "
              f"{a['passes']:.0f}, {a['tokens']:.0f} | - |")
        print(f"| prefill on the annotation daemon, 8,192 tokens a pass (tokens/s) | "
              f"{b['prefill_rate']:.0f} | {a['prefill_rate']:.0f} | "
              f"{a['prefill_rate'] / b['prefill_rate']:.2f} |")


if __name__ == "__main__":
    main()
