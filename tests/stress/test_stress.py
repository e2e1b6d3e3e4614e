"""The long runs of the reliability plan (docs/reliability.md, tests 1, 2,
5, 11 and 12), behind `make stress`, not in CI: the real daemon on
the fake model, load from tests/stress/load_client (C++, asynchronous, so the
client is not the limit). Every figure is written to $STRESS_OUT (JSON) for
docs/reliability.md. Durations come from the environment so that a short
rehearsal (STRESS_SECONDS=5 STRESS_SOAK_SECONDS=60) exercises the same code.
"""
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from conftest import add_token, in_flight, metric, pb, small_request, with_token  # noqa: E402
from conftest import daemon, start_daemon  # noqa: E402,F401  (fixtures)

LOAD_CLIENT = os.environ.get("MESA_ANYJEV_LOAD_CLIENT", "build/tests/load_client")
SECONDS = float(os.environ.get("STRESS_SECONDS", "60"))
OVERLOAD_SECONDS = float(os.environ.get("STRESS_OVERLOAD_SECONDS", "30"))
SOAK_SECONDS = float(os.environ.get("STRESS_SOAK_SECONDS", "600"))
SOAK_WARMUP = min(60.0, SOAK_SECONDS / 5)
IDLE = int(os.environ.get("STRESS_IDLE", "500"))
VALGRIND_SECONDS = float(os.environ.get("STRESS_VALGRIND_SECONDS", "60"))
OUT = Path(os.environ.get("STRESS_OUT", "build/stress/results.json"))
MiB = 1 << 20


@pytest.fixture(scope="session")
def record():
    """Figures by test name, merged into $STRESS_OUT at the end."""
    figures = json.loads(OUT.read_text()) if OUT.exists() else {}
    yield figures.__setitem__
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")


def load(daemon, *args):
    out = subprocess.run([LOAD_CLIENT, "--address", daemon.address, *map(str, args)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def load_as(daemon, token, *args):
    """The load client sending as the tenant of `token`, started and left
    running: the caller reads its figures with `finish`."""
    return subprocess.Popen([LOAD_CLIENT, "--address", daemon.address, "--token-env",
                             "STRESS_TOKEN", *map(str, args)], stdout=subprocess.PIPE,
                            text=True, env=dict(os.environ, STRESS_TOKEN=token))


def finish(client):
    out, _ = client.communicate()
    assert client.returncode == 0, out
    return json.loads(out)


def proc_status(pid):
    """(resident bytes, threads, open fds) of a process, from /proc."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text()
                  .splitlines() if ":" in line)
    rss = int(fields["VmRSS"].split()[0]) * 1024
    return rss, int(fields["Threads"]), len(os.listdir(f"/proc/{pid}/fd"))


def connections(pid):
    """The TCP connections (not listeners) a process holds: (state, local
    port, peer port), from /proc/<pid>/fd and /proc/net/tcp{,6}."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    held = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes and fields[3] != "0A":  # 0A: LISTEN
                held.append((fields[3], int(fields[1].rsplit(":", 1)[1], 16),
                             int(fields[2].rsplit(":", 1)[1], 16)))
    return held


def settled_status(daemon):
    """proc_status once the daemon holds no connection but the test's own
    gRPC channel: the load client's connections, and the daemon's side of
    the test's last /metrics scrape (closed by the client, CLOSE_WAIT until
    cpp-httplib's thread reads the end), are closed asynchronously after
    the calls end; counted before that, each reads as a descriptor more."""
    def only_own_channel():
        held = connections(daemon.proc.pid)
        own = all(state == "01" and local == daemon.port for state, local, _ in held)
        return True if own and len(held) <= 1 else None

    daemon.poll(only_own_channel, "no connection but the test's channel", 60)
    return proc_status(daemon.proc.pid)


def test_1_sustained_load_loses_nothing(start_daemon, record):
    daemon = start_daemon()
    fast = load(daemon, "--in-flight", 16, "--seconds", SECONDS)
    # Every call sent got exactly one status, all OK, and the daemon counted
    # the same calls (its counter includes the client's one Tokenize).
    assert fast["codes"] == {"OK": fast["calls"]}, fast
    scrape = daemon.wait_metrics(in_flight(0), "no call in flight")
    assert metric(scrape, "mesa_anyjev_requests_total", code="OK",
                  method="Logprobs") == fast["calls"]
    slow_daemon = start_daemon("--set", "model.fake_delay_s=0.001")
    slow = load(slow_daemon, "--in-flight", 8, "--seconds", SECONDS)
    assert slow["codes"] == {"OK": slow["calls"]}, slow
    record("1_sustained", {"service_0ms": fast, "service_1ms": slow})
    assert fast["rate"] >= 5000 and fast["latency_ms"]["p99"] <= 10, fast
    assert slow["rate"] >= 700 and slow["latency_ms"]["p99"] <= 20, slow


def test_2_overload_is_refused_at_once_and_recovers(start_daemon, record):
    # The queue holds 64 calls of 20 ms. Offered 96 in flight (32 over) and
    # 256 (192 over), twice: a closed loop's latency is in-flight/throughput
    # (Little's law), so the refusal figure that says how fast a refusal is
    # comes from the 96 run; the 256 runs show what a flood costs.
    daemon = start_daemon("--set", "server.queue_capacity=64", "--set", "model.fake_delay_s=0.02")
    before = settled_status(daemon)
    runs, after = {}, []
    for name, offered in [("offered_96", 96), ("offered_256", 256), ("offered_256_again", 256)]:
        result = load(daemon, "--in-flight", offered, "--seconds", OVERLOAD_SECONDS,
                      "--channels", 4)
        # The queue drains once the load stops (the deadline only bounds a failure).
        daemon.wait_metrics(lambda t: metric(t, "mesa_anyjev_queue_depth") == 0
                            and metric(t, "mesa_anyjev_inflight_requests") == 0, "the queue empty")
        after.append(settled_status(daemon))
        runs[name] = result
        if name == "offered_96":
            # The daemon's own histogram: answered calls take at least 20 ms,
            # so every Logprobs under 5 ms is a refusal.
            scrape = daemon.metrics()
            result["refused_under_5ms_server"] = metric(
                scrape, "mesa_anyjev_request_duration_seconds_bucket", le="0.005",
                method="Logprobs")
        assert set(result["codes"]) == {"OK", "RESOURCE_EXHAUSTED"}, result
        assert result["latency_ms_by_code"]["OK"]["p99"] <= 64 * 20 + 100, result
    health = daemon.health_status()
    figures = dict(runs, rss_mb=[s[0] / MiB for s in [before, *after]],
                   threads=[s[1] for s in [before, *after]], fds=[s[2] for s in [before, *after]],
                   health_after=health)
    record("2_overload", figures)
    # At least 99 % of refusals left the daemon within 5 ms (the p99 target,
    # read off its own histogram). The client's p99 adds the transport on the
    # two cores it shares with the daemon (a figure, see docs/reliability.md).
    first = runs["offered_96"]
    first["refused_under_5ms_fraction"] = (first["refused_under_5ms_server"]
                                           / first["codes"]["RESOURCE_EXHAUSTED"])
    assert first["refused_under_5ms_fraction"] >= 0.99, figures
    assert after[-1][0] - before[0] <= 50 * MiB, figures
    assert health == "SERVING"
    # gRPC's pool may add threads under the first flood; a second adds none.
    assert after[2][1] <= after[1][1] and after[2][2] <= after[1][2], figures


def test_2_one_tenants_flood_is_refused_and_anothers_calls_served(start_daemon, record, tmp_path):
    # Two tenants of a tokens file: a pipeline floods with 256 calls in
    # flight, a curator keeps 8. The pipeline is held to its own limit (16
    # calls, engine.tenant_max_queued_calls) and refused past it, counted by
    # tenant and reason, so the queue (64) always has room for the curator,
    # every one of whose calls is served.
    tokens_file = tmp_path / "tokens.yaml"
    admin = add_token(tokens_file, "admin", "--role", "admin")
    pipeline = add_token(tokens_file, "pipeline", "--role", "decide", "--priority", "batch")
    curator = add_token(tokens_file, "curator", "--role", "decide")
    daemon = start_daemon("--set", "server.queue_capacity=64", "--set", "model.fake_delay_s=0.02",
                          "--set", f"auth.tokens_file={tokens_file}")
    with_token(daemon, admin)
    flood = load_as(daemon, pipeline, "--in-flight", 256, "--seconds", OVERLOAD_SECONDS,
                    "--channels", 4)
    served = load_as(daemon, curator, "--in-flight", 8, "--seconds", OVERLOAD_SECONDS)
    flood, served = finish(flood), finish(served)
    scrape = daemon.wait_metrics(in_flight(0), "no call in flight")
    record("2_overload_two_tenants", {"pipeline": flood, "curator": served})
    assert set(flood["codes"]) == {"OK", "RESOURCE_EXHAUSTED"}, flood
    assert served["codes"] == {"OK": served["calls"]}, served
    # Every refusal was the pipeline's own limit, none the queue's capacity.
    assert metric(scrape, "mesa_anyjev_tenant_refusals_total", tenant="pipeline",
                  reason="tenant_calls") == flood["codes"]["RESOURCE_EXHAUSTED"]
    for reason in ("capacity", "tenant_calls", "tenant_tokens"):
        assert metric(scrape, "mesa_anyjev_tenant_refusals_total", tenant="curator",
                      reason=reason) == 0
    assert metric(scrape, "mesa_anyjev_tenant_refusals_total", tenant="pipeline",
                  reason="capacity") == 0
    assert daemon.health_status() == "SERVING"


def test_5_drain_finishes_sixteen_calls(start_daemon, record):
    daemon = start_daemon("--set", "model.fake_delay_s=1.5", "--set", "server.drain_deadline_s=60")
    request = small_request(daemon)
    with ThreadPoolExecutor(max_workers=16) as pool:
        futures = [pool.submit(daemon.stub.Logprobs, request, timeout=120) for _ in range(16)]
        daemon.wait_metrics(in_flight(16), "sixteen calls accepted")
        signalled = time.monotonic()
        daemon.signal(signal.SIGTERM)
        daemon.wait_log("draining")
        not_serving = time.monotonic() - signalled
        with pytest.raises(grpc.RpcError) as refused:
            daemon.stub.Logprobs(request, timeout=10)
        ok = sum(1 for f in futures if f.result().groups)
    code = daemon.wait(timeout=120)
    exited = time.monotonic() - signalled
    record("5_drain", {"drained_ok": ok, "of": 16, "exit_code": code,
                       "draining_logged_s": not_serving, "exit_after_signal_s": exited,
                       "new_call": refused.value.code().name})
    assert ok == 16 and code == 0
    # Refused, never served: UNAVAILABLE from the daemon (draining) or from
    # gRPC once its listener closed; a call that reaches the transport just
    # as gRPC's Shutdown begins is cancelled by gRPC itself (CANCELLED: seen
    # once in 25 runs on a loaded 2-core host; our clients retry both).
    assert refused.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)


def leaking_control():
    """The negative control: a process that leaks 256 KiB a second, which the
    same growth check must catch."""
    code = ("import time\nkeep = []\nwhile True:\n"
            "    keep.append(b'x' * 256 * 1024)\n    time.sleep(1)\n")
    return subprocess.Popen([sys.executable, "-c", code])


def test_11_soak_keeps_memory_fds_and_threads_flat(start_daemon, record):
    daemon = start_daemon()
    control = leaking_control()
    client = subprocess.Popen(
        [LOAD_CLIENT, "--address", daemon.address, "--in-flight", "4", "--channels", "2",
         "--seconds", str(SOAK_SECONDS), "--mix", "logprobs=6,tokenize=2,bad=1,cancel=1,decide=2"],
        stdout=subprocess.PIPE, text=True)
    samples = []
    try:
        start = time.monotonic()
        while client.poll() is None:
            samples.append((time.monotonic() - start, *proc_status(daemon.proc.pid),
                            proc_status(control.pid)[0]))
            try:
                client.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        result = json.loads(client.stdout.read())
    finally:
        control.kill()
        control.wait()
    warm = [s for s in samples if s[0] >= SOAK_WARMUP]
    assert len(warm) >= 2, samples
    growth = (warm[-1][1] - warm[0][1]) / MiB
    control_growth = (warm[-1][4] - warm[0][4]) / MiB
    limit = 20.0
    figures = dict(result, rss_start_mb=warm[0][1] / MiB, rss_end_mb=warm[-1][1] / MiB,
                   rss_growth_mb=growth, rss_max_mb=max(s[1] for s in warm) / MiB,
                   threads=sorted({s[2] for s in warm}), fds=sorted({s[3] for s in warm}),
                   control_growth_mb=control_growth, warmup_s=SOAK_WARMUP)
    record("11_soak", figures)
    assert "UNKNOWN" not in result["codes"] and "INTERNAL" not in result["codes"], result
    assert growth <= limit, figures
    # gRPC's pools open and close a thread or an fd now and then; a leak of
    # either would grow with the 4 million calls instead.
    assert max(figures["threads"]) - min(figures["threads"]) <= 2, figures
    assert max(figures["fds"]) - min(figures["fds"]) <= 2, figures
    # The check catches a leak of 256 KiB/s only on a run long enough to
    # pass the limit; a short rehearsal says so instead of failing.
    if SOAK_SECONDS - SOAK_WARMUP >= 100:
        assert control_growth > limit, figures


def test_12_five_hundred_idle_connections(start_daemon, record):
    daemon = start_daemon()
    rss0, threads0, fds0 = proc_status(daemon.proc.pid)
    holder = subprocess.Popen([LOAD_CLIENT, "--address", daemon.address, "--idle", str(IDLE)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    first = json.loads(holder.stdout.readline())
    rss1, threads1, fds1 = proc_status(daemon.proc.pid)
    # Others are served while the idle connections are held.
    info = daemon.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=30)
    holder.stdin.close()
    last = json.loads(holder.stdout.readline())
    assert holder.wait(timeout=120) == 0, last
    figures = {"connections": IDLE, "connected": first["connected"],
               "answered_after": last["answered"], "still_ready": last["still_ready"],
               "rss_growth_mb": (rss1 - rss0) / MiB, "threads": [threads0, threads1],
               "fds": [fds0, fds1]}
    record("12_idle_connections", figures)
    assert info.name == "fake"
    assert first["connected"] == IDLE and last["answered"] == IDLE
    assert rss1 - rss0 <= 100 * MiB, figures


def test_12_a_pinging_client_is_closed_and_others_served(start_daemon, record):
    daemon = start_daemon()
    abuse = subprocess.run([LOAD_CLIENT, "--address", daemon.address, "--ping-abuse"],
                           capture_output=True, text=True, timeout=180)
    result = json.loads(abuse.stdout)
    info = daemon.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=30)
    record("12_ping_abuse", dict(result, goaway_too_many_pings="too_many_pings" in abuse.stderr))
    assert result["closed_by_server"] and "too_many_pings" in abuse.stderr, abuse.stderr
    assert info.name == "fake" and daemon.health_status() == "SERVING"


def h2_frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + \
        struct.pack(">I", stream) + payload


def hpack_literal(name, value):
    """A header field as a literal without indexing, no Huffman (RFC 7541 6.2.2)."""
    def string(b):
        assert len(b) < 127
        return bytes([len(b)]) + b
    return b"\x40" + string(name) + string(value)


def read_frames(sock, until):
    """Frames (type, flags, stream, payload) until `until(frames)` holds or
    the server stops sending for 10 s."""
    frames, buffer = [], b""
    sock.settimeout(10)
    while not until(frames):
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            break
        buffer += chunk
        while len(buffer) >= 9:
            length = int.from_bytes(buffer[:3], "big")
            if len(buffer) < 9 + length:
                break
            kind, flags = buffer[3], buffer[4]
            stream = int.from_bytes(buffer[5:9], "big") & 0x7FFFFFFF
            frames.append((kind, flags, stream, buffer[9:9 + length]))
            buffer = buffer[9 + length:]
            if kind == 4 and not flags & 1:  # SETTINGS: acknowledge
                sock.sendall(h2_frame(4, 1, 0))
    return frames


def test_12_streams_that_never_send_are_capped(start_daemon, record):
    # A raw HTTP/2 client opens streams (HEADERS, never DATA). Up to the
    # per-connection cap they just hang, reach none of our handlers, and
    # other clients are served; one stream past the cap and gRPC fails every
    # hanging stream of that connection (UNAVAILABLE; its log says "Max
    # stream count exceeded").
    cap = 64
    daemon = start_daemon("--set", f"server.max_concurrent_streams={cap}")
    rss0, threads0, fds0 = proc_status(daemon.proc.pid)
    sock = socket.create_connection(("127.0.0.1", daemon.port))
    sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0))
    settings = read_frames(sock, lambda f: any(k == 4 and not fl & 1 for k, fl, _, _ in f))
    announced = None
    for kind, flags, _, payload in settings:
        if kind == 4 and not flags & 1:
            for i in range(0, len(payload), 6):
                ident, value = struct.unpack(">HI", payload[i:i + 6])
                if ident == 3:  # SETTINGS_MAX_CONCURRENT_STREAMS
                    announced = value
    block = b"".join(hpack_literal(n, v) for n, v in [
        (b":method", b"POST"), (b":scheme", b"http"),
        (b":path", b"/mesa.anyjev.v1.Inference/Logprobs"),
        (b":authority", daemon.address.encode()), (b"content-type", b"application/grpc"),
        (b"te", b"trailers")])
    sock.sendall(b"".join(h2_frame(1, 4, 2 * i + 1, block) for i in range(cap)))
    # Others are served while the streams hang open; none reached a handler.
    info = daemon.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=30)
    scrape = daemon.metrics()
    rss1, threads1, fds1 = proc_status(daemon.proc.pid)
    sock.sendall(h2_frame(1, 4, 2 * cap + 1, block))

    def statuses(frames):
        return [(s, p) for k, _, s, p in frames if k == 1 and b"grpc-status" in p]
    answered = statuses(read_frames(sock, lambda f: len(statuses(f)) >= cap))
    sock.close()
    figures = {"announced_max_concurrent_streams": announced, "hanging": cap,
               "inflight_while_hanging": metric(scrape, "mesa_anyjev_inflight_requests"),
               "answered_after_one_more": len(answered),
               "all_unavailable": all(b"grpc-status\x0214" in p for _, p in answered),
               "rss_growth_mb": (rss1 - rss0) / MiB, "threads": [threads0, threads1],
               "fds": [fds0, fds1]}
    record("12_never_sending_streams", figures)
    assert announced == cap and info.name == "fake", figures
    assert figures["inflight_while_hanging"] == 0, figures
    assert len(answered) == cap and figures["all_unavailable"], figures
    assert daemon.health_status() == "SERVING"


def test_11_valgrind_finds_no_definite_leak(start_daemon, record):
    # 60 s of mixed calls at a low rate with the daemon under memcheck: at
    # exit no block definitely lost (libtorch's load-time statics aside, see
    # libtorch.supp) and no memcheck error with a frame of ours.
    report = OUT.parent / "memcheck.txt"
    report.parent.mkdir(parents=True, exist_ok=True)
    daemon = start_daemon(
        wrapper=["valgrind", "--leak-check=full", "--show-leak-kinds=definite",
                 "--errors-for-leak-kinds=definite", f"--log-file={report}",
                 f"--suppressions={Path(__file__).parent / 'libtorch.supp'}"],
        start_timeout=900)
    result = load(daemon, "--in-flight", 2, "--seconds", VALGRIND_SECONDS,
                  "--mix", "logprobs=6,tokenize=2,bad=1,cancel=1,decide=2")
    daemon.signal(signal.SIGTERM)
    code = daemon.wait(timeout=900)
    text = report.read_text()
    lost = re.search(r"definitely lost: ([\d,]+) bytes in ([\d,]+) blocks", text)
    errors = re.search(r"ERROR SUMMARY: ([\d,]+) errors", text)
    figures = dict(result, exit_code=code,
                   definitely_lost_bytes=int(lost.group(1).replace(",", "")) if lost else 0,
                   error_summary=int(errors.group(1).replace(",", "")) if errors else None,
                   leak_summary_present="LEAK SUMMARY" in text or "All heap blocks" in text,
                   errors_in_our_frames=len(re.findall(r"by 0x[0-9A-F]+: mesa_anyjev::|"
                                                       r"at 0x[0-9A-F]+: mesa_anyjev::", text)))
    record("11_valgrind", figures)
    assert code == 0 and figures["leak_summary_present"], text[-3000:]
    assert figures["definitely_lost_bytes"] == 0, text[-3000:]
    assert figures["errors_in_our_frames"] == 0, text[-6000:]
