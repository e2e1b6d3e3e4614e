"""The variants the GPU check times side by side in one run: a variant is a
name and configuration overrides ("section.field=value"), passed as --set to
qwen3_dump (every variant's timings and anatomy) and to mesa-anyjevd (the
daemon sections run the first variant, the baseline). Each variant's
settings are checked by the daemon's own loader (--print-config) before any
GPU time is spent on it: a key the bundle's binaries do not know is refused
there, by name."""
import json
import os
import subprocess

# The baseline first: the defaults (sdpa, which on CUDA is the
# variable-length kernel, as the daemon serves). Then each engine switch of
# the engine issue on its own, and all of them together; their parity is
# checked on the device (the variant_parity section) before they are timed.
# GPU_VARIANTS='[["name", ["key=value", ...]], ...]' adds some for one run
# without an edit. Every variant costs about ESTIMATE_S["variant"] on the GPU
# (one 8B load, the timings and two profiled passes): the budget skips the
# last ones first.
ALL = ["model.kernels=fused", "engine.cuda_graph_tokens=512", "model.cascade_attention=true"]
VARIANTS = [
    ("baseline", []),
    ("all switches", ALL),
    ("fused kernels", ["model.kernels=fused"]),
    ("cuda graphs", ["engine.cuda_graph_tokens=512"]),
    ("cascade attention", ["model.cascade_attention=true"]),
]


def chosen(smoke=False):
    """The variants to run; on the CPU (smoke) the baseline and all switches
    together only: every path of the check, at a third of the time."""
    extra = json.loads(os.environ.get("GPU_VARIANTS", "[]"))
    base = VARIANTS[:2] if smoke else VARIANTS
    return [{"name": name, "overrides": list(overrides)}
            for name, overrides in [*base, *extra]]


def check_settings(daemon, variants):
    """(the variants whose settings load, {name: why} for the others)."""
    good, refused = [], {}
    for variant in variants:
        sets = [a for kv in variant["overrides"] for a in ("--set", kv)]
        out = subprocess.run([daemon, "--model", "fake", *sets, "--print-config"],
                             capture_output=True, text=True, timeout=60)
        if out.returncode == 0:
            good.append(variant)
        else:
            refused[variant["name"]] = out.stderr.strip()[-1000:]
    return good, refused


def anatomy_markdown(anatomy, title):
    """A pass's anatomy (tests/tools/pass_anatomy.h) as a markdown table."""
    unit = anatomy["unit"]
    lines = [f"#### {title}", "",
             f"{anatomy['tokens']} new tokens ({anatomy['batch']} prompts), "
             f"{anatomy['passes']} pass(es), {anatomy['layers']} layers; span "
             f"{anatomy['span_ms']:.2f} ms (wall {anatomy['wall_ms']:.2f} ms); "
             f"{anatomy['per_layer']['count']:.1f} {unit} and "
             f"{anatomy['per_layer']['ms']:.3f} ms per layer", "",
             f"| stage | {unit} | ms | share | host ms |", "|---|---|---|---|---|"]
    for r in anatomy["rows"]:
        share = r["ms"] / anatomy["span_ms"] if anatomy["span_ms"] else 0.0
        lines.append(f"| {r['stage']}{' (per layer)' if r['per_layer'] else ''} | {r['count']} | "
                     f"{r['ms']:.3f} | {share:.1%} | {r['host_ms']:.3f} |")
    return "\n".join(lines) + "\n"


def anatomy_checks(anatomy):
    """What makes an anatomy trustworthy: the rows add up to the span, the
    kernels were found in their stages, none fell outside the span."""
    kernels = sum(r["count"] for r in anatomy["rows"]) or 1
    checks = {"sum_vs_span": anatomy["sum_ms"] / anatomy["span_ms"] if anatomy["span_ms"] else 0,
              "unattributed_share": anatomy["unattributed"] / kernels,
              "outside_span": anatomy["outside_span"],
              "passes": anatomy["passes"]}
    checks["ok"] = (0.9 <= checks["sum_vs_span"] <= 1.1 and checks["unattributed_share"] <= 0.02
                    and checks["passes"] == 1 and sum(r["count"] for r in anatomy["rows"]) > 0)
    return checks
