"""make bench-before-after BEFORE=DIR: bench-engine's rows for two builds of
the engine side by side in one run (a change that should change no speed,
such as a reshaping, shows it here). DIR is the build directory of the
other tree (its tests/qwen3_dump and server/mesa-anyjevd); the peer rows
(transformers) are measured again beside each build, so each build's ratio
is its own and the two ratios compare. The rounds alternate the builds'
order. With --annotation, the annotation workload through each build's
daemon (ours only: the anyjev peer does not change between builds).

Prints one table: per row, each build's ratio to its peer (median and
spread over the rounds) and after / before."""
import argparse
import os
import statistics
from pathlib import Path

import torch
from transformers import Qwen3ForCausalLM

import annotation_workload
from bench_engine import Ours, compare, keep_freed_memory


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
        for r in range(args.rounds):
            order = list(builds) if r % 2 == 0 else list(reversed(builds))
            for name in order:
                conftest.DAEMON = builds[name]["daemon"]
                _, facts, figures = annotation_workload.run(
                    directory, ["--set", "model.cpu_gemm=auto"], args.threads, peer=False)
                annotation.setdefault(name, []).append(figures)
                print(f"  round {r + 1}, {name}: " + "; ".join(facts), flush=True)

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
        def seconds(name):
            return [f["seconds"] for f in annotation[name]]
        b, a = seconds("before"), seconds("after")
        mb, ma = statistics.median(b), statistics.median(a)
        print(f"| annotation workload through Decide, ours (seconds; lower is better) | "
              f"{mb:.1f} ({min(b):.1f}-{max(b):.1f}) | {ma:.1f} ({min(a):.1f}-{max(a):.1f}) | "
              f"{ma / mb:.2f} |")


if __name__ == "__main__":
    main()
