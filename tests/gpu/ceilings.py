"""The two ceilings of the device, measured in the same run as every figure
the GPU check reports, and the check of those figures against them.

- The GEMM rate: an n^3 product in the check's dtype (bf16 on the GPU,
  n = 8192) on random data, the median of ten timed products after three
  warm-ups, timed with CUDA events (a synchronised host clock on the CPU,
  where the faster of MKL's sgemm and oneDNN's packed matmul counts, as the
  engine may run either: model.cpu_gemm).
- The copy rate: one buffer (2 GiB on the GPU) copied into another on the
  same device, bytes read plus bytes written, median of ten.

A figure is impossible, and fails the run by name, when the arithmetic it
counts (2 x the blocks' parameters x the new tokens it computed, attention
and lm_head not counted) implies more than FLOP_SLACK x the GEMM rate, or
when it took less time than reading the blocks' weights once per pass at
BYTE_SLACK x the copy rate. The counts are lower bounds, so a violation is
certain, never a near miss: the slack covers the spread of the ceilings
themselves (769-806 TFLOP/s over the H200 runs) and a read-only stream
running somewhat faster than a copy."""
import statistics
import time

import torch

FLOP_SLACK = 1.10
BYTE_SLACK = 1.20


def timed(fn, device, repeat=10, warmup=3):
    """Seconds of each of `repeat` calls of `fn` after `warmup` calls."""
    for _ in range(warmup):
        fn()
    seconds = []
    if device == "cuda":
        torch.cuda.synchronize()
        for _ in range(repeat):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            seconds.append(start.elapsed_time(end) / 1e3)
        return seconds
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - start)
    return seconds


def measure(device, dtype, smoke):
    """Both ceilings on `device`: {gemm_flops, copy_bytes_per_s, and how}."""
    n = 2048 if smoke else 8192
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    gemm = timed(lambda: a @ b, device)
    paths = {"matmul": 2 * n ** 3 / statistics.median(gemm)}
    if device == "cpu" and dtype == torch.float32:
        packed = torch.ops.mkldnn._reorder_linear_weight(b, None)
        onednn = timed(lambda: torch.ops.mkldnn._linear_pointwise(a, packed, None, "none", [],
                                                                   ""), device)
        paths["onednn packed"] = 2 * n ** 3 / statistics.median(onednn)
        if statistics.median(onednn) < statistics.median(gemm):
            gemm = onednn
    del a, b
    nbytes = (256 << 20) if smoke else (2 << 30)
    src = torch.empty(nbytes // 4, device=device, dtype=torch.float32).uniform_()
    dst = torch.empty_like(src)
    copy = timed(lambda: dst.copy_(src), device)
    del src, dst
    if device == "cuda":
        torch.cuda.empty_cache()
    flops = [2 * n ** 3 / s for s in gemm]
    rates = [2 * nbytes / s for s in copy]
    return {"gemm_flops": statistics.median(flops),
            "gemm_spread": [min(flops), max(flops)], "gemm_shape": f"{n}^3 {dtype}",
            "gemm_paths": paths,
            "copy_bytes_per_s": statistics.median(rates),
            "copy_spread": [min(rates), max(rates)], "copy_bytes": nbytes,
            "tflops": statistics.median(flops) / 1e12,
            "copy_tb_per_s": statistics.median(rates) / 1e12}


def counted_rows(node, path=""):
    """Every table row in the report that says what it computed: (where,
    side, row, counted)."""
    if isinstance(node, dict):
        if "measurement" in node and isinstance(node.get("counted"), dict):
            for side, count in node["counted"].items():
                yield f"{path}: {node['measurement']}", side, count
        for key, value in node.items():
            if key != "counted":
                yield from counted_rows(value, f"{path}/{key}" if path else key)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from counted_rows(value, f"{path}[{i}]")


def rate(flops):
    return f"{flops / 1e12:.1f} TFLOP/s" if flops >= 1e12 else f"{flops / 1e9:.1f} GFLOP/s"


def verdict(report, block_params, element_bytes, ceilings):
    """The `ceilings` verdict: every counted figure of `report` against the
    two ceilings; ok false, each violation named, when one is impossible."""
    if not ceilings:
        return {"ok": True, "checked": 0, "violations": [],
                "note": "the ceilings were not measured: no figure could be checked"}
    peak, copy = ceilings["gemm_flops"], ceilings["copy_bytes_per_s"]
    violations, checked = [], 0
    for where, side, c in counted_rows(report):
        seconds, depth = c["seconds"], c.get("depth", 1.0)
        if not seconds or seconds <= 0:
            continue
        checked += 1
        flops = 2 * block_params * c["tokens"] * depth
        read_s = c.get("weight_reads", 1) * block_params * element_bytes * depth / copy
        if flops / seconds > FLOP_SLACK * peak:
            violations.append(
                f"{where} ({side}): {c['tokens']} tokens in {seconds * 1e3:.2f} ms imply "
                f"{rate(flops / seconds)}, above the measured GEMM peak {rate(peak)} "
                f"(x{FLOP_SLACK})")
        if seconds * BYTE_SLACK < read_s:
            violations.append(
                f"{where} ({side}): {seconds * 1e3:.2f} ms is shorter than reading the blocks' "
                f"weights {c.get('weight_reads', 1)} time(s) at the measured copy rate "
                f"({read_s * 1e3:.2f} ms at {copy / 1e9:.0f} GB/s, /{BYTE_SLACK})")
    return {"ok": not violations, "checked": checked, "violations": violations,
            "flop_slack": FLOP_SLACK, "byte_slack": BYTE_SLACK}
