"""Issue 16: several daemons behind Debian's nginx, configured by the shipped
deploy/nginx/mesa-anyjev.conf (addresses, ports and paths replaced). nginx
hashes the clients' mesa-anyjev-affinity key with consistent hashing.

- An annotation workload on a tiny Qwen3 through three daemons: each key
  stays on one daemon, the prefix cache hits more and the daemons compute
  fewer tokens than under round robin (the same nginx without the hash). The
  figures go to $MESA_ANYJEV_BALANCER_RESULTS (docs/operations.md records
  them).
- Both runs equal a run against one daemon: the batch priors travel with the
  run (client.priors=run), so routing cannot change a decision.
- SIGTERM to one daemon mid-run fails no call; the others keep their keys.
- A daemon added with a reload takes new keys, and only keys that move to it
  move.
"""
import bisect
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
import zlib
from collections import Counter, defaultdict
from pathlib import Path

import grpc
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from make_tiny_qwen3 import make  # noqa: E402

from conftest import CLI, metric, pb, run_cli  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "deploy" / "nginx" / "mesa-anyjev.conf"
NGINX = "/usr/sbin/nginx"
CARDS = sorted(p.stem for p in (ROOT / "data" / "cards").glob("*.md"))
MODEL = ("--set", "model.name=tiny/qwen3")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    """Debian's nginx on the shipped configuration, in the foreground."""

    def __init__(self, tmp: Path, daemons, affinity=True):
        self.dir = tmp
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.affinity = affinity
        self.access = tmp / "access.log"
        self.error = tmp / "error.log"
        self.conf = tmp / "nginx.conf"
        self.write(daemons)
        self.proc = subprocess.Popen([NGINX, "-p", str(tmp), "-c", str(self.conf),
                                      "-e", str(self.error), "-g", "daemon off;"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        self._wait(lambda: self._accepts(), "nginx listening")

    def write(self, daemons):
        text = SHIPPED.read_text()
        servers = "".join(f"    server {d.address} max_fails=1 fail_timeout=10s;\n"
                          for d in daemons)
        text, n = re.subn(r"(?:    server \S+ max_fails=1 fail_timeout=10s;\n)+", servers, text)
        assert n == 1, "the shipped upstream block changed shape"
        replaced = {"listen 50150 http2;": f"listen {self.address} http2;",
                    "/run/mesa-anyjev-nginx.pid": str(self.dir / "nginx.pid"),
                    "/var/log/mesa-anyjev/nginx-error.log warn": f"{self.error} notice",
                    "/var/log/mesa-anyjev/nginx-access.log": str(self.access)}
        for old, new in replaced.items():
            assert old in text, old
            text = text.replace(old, new)
        if not self.affinity:  # nginx's default: round robin
            text = text.replace("    hash $http_mesa_anyjev_affinity consistent;\n", "")
        self.conf.write_text(text)

    def _accepts(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return None

    def _wait(self, probe, what, timeout=60):
        deadline = time.monotonic() + timeout
        while (found := probe()) is None:
            assert self.proc.poll() is None, f"nginx exited before {what}: {self.errors()}"
            assert time.monotonic() < deadline, f"never saw {what}: {self.errors()}"
            time.sleep(0.02)
        return found

    def reload(self, daemons):
        """Rewrites the upstream list and waits until the new workers run
        (nginx logs each reconfiguration and worker start at notice) and the
        old ones have exited: until an old worker reads its QUIT it still
        accepts connections, and serves them with the old upstreams."""
        starts = self.errors().count("start worker process")
        old = self.workers()
        self.write(daemons)
        self.proc.send_signal(signal.SIGHUP)
        self._wait(lambda: True if "reconfiguring" in self.errors()
                   and self.errors().count("start worker process") > starts
                   and not old & self.workers() else None,
                   "the reload's new workers and the old ones' exit")

    def workers(self):
        pid = self.proc.pid
        return set(Path(f"/proc/{pid}/task/{pid}/children").read_text().split())

    def errors(self):
        return self.error.read_text(errors="replace") if self.error.exists() else ""

    def calls(self, at_least=0):
        """(key, upstream that answered, grpc status, uri) per call nginx
        passed on; `tried` keeps every upstream of a call, in order. nginx
        logs a call after its last byte went out, so a client can see the
        answer first: `at_least` waits for the lines of calls it knows ended."""
        return self._wait(lambda: found if len(found := self._logged()) >= at_least else None,
                          f"{at_least} calls in the access log")

    def _logged(self):
        out = []
        self.tried = []
        for line in self.access.read_text().splitlines():
            m = re.search(r"key=(\S*) upstream=(.+?) status=\d+ grpc=(\S*) (\S+)$", line)
            if m:
                ups = m.group(2).split(", ")
                self.tried.append(ups)
                trailer, header = m.group(3).split("/")
                status = trailer if trailer != "-" else header
                out.append((m.group(1), ups[-1], status, m.group(4)))
        return out

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def start_nginx(tmp_path):
    started = []

    def start(daemons, affinity=True, name="nginx"):
        d = tmp_path / name
        d.mkdir()
        started.append(Nginx(d, daemons, affinity))
        return started[-1]

    yield start
    for n in started:
        n.stop()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return make(tmp_path_factory.mktemp("balanced") / "tiny-qwen3", tied=False)


def annotate(address, card, *extra):
    """Every decision of the run: what was asked about which state, at which
    level and prior, and its probabilities."""
    r = run_cli("annotate", "--backend", "hf", "--card", str(ROOT / "data" / "cards" / f"{card}.md"),
                "--candidates", str(ROOT / "data" / "candidates" / f"{card}.json"),
                "--set", f"client.address={address}", "--json", *extra, timeout=600)
    assert r.returncode == 0, r.stderr
    return [((d["question_id"], d["state_sha256"], d["level"], d["diagnostics"].get("prior_method")),
             d["probs"] or []) for d in json.loads(r.stdout)["decisions"]]  # rules: no probs


def same_decisions(a, b):
    # A prefix from the cache and one computed afresh agree to float32
    # rounding, not bit for bit (the engine's exactness bound is 1e-5).
    return len(a) == len(b) and all(
        ka == kb and len(pa) == len(pb) and all(abs(x - y) <= 1e-6 for x, y in zip(pa, pb))
        for (ka, pa), (kb, pb) in zip(a, b))


def avus(out):
    # The proposals with their probabilities and levels.
    return [line for line in out.splitlines() if line.startswith("  ")]


def counters(daemons):
    names = {"computed": "mesa_anyjev_tokens_processed_total",
             "reused": "mesa_anyjev_prefix_cache_reused_tokens_total"}
    rows = []
    for d in daemons:
        text = d.metrics()
        rows.append({k: metric(text, v) for k, v in names.items()})
    return rows


def run_workload(start_daemon, start_nginx, checkpoint, affinity):
    daemons = [start_daemon("--model", str(checkpoint), *MODEL, name=f"{'hash' if affinity else 'rr'}{i}")
               for i in range(3)]
    lb = start_nginx(daemons, affinity=affinity, name="hash" if affinity else "rr")
    out = {card: annotate(lb.address, card, "--set", "backend.hf_model=tiny/qwen3")
           for card in CARDS}
    per_daemon = counters(daemons)
    calls = lb.calls()
    for d in daemons:
        d.stop()
    return out, per_daemon, calls


def test_affinity_against_round_robin_and_equal_to_one_daemon(start_daemon, start_nginx,
                                                              checkpoint):
    single = start_daemon("--model", str(checkpoint), *MODEL, name="single")
    one = {card: annotate(single.address, card, "--set", "backend.hf_model=tiny/qwen3")
           for card in CARDS}
    single.stop()
    hashed, hashed_work, hashed_calls = run_workload(start_daemon, start_nginx, checkpoint, True)
    rr, rr_work, rr_calls = run_workload(start_daemon, start_nginx, checkpoint, False)

    # Routing changes where decisions are computed, not what they are; the
    # batch prior is in play (a run counts more than 8 states per question).
    assert all(one[card] for card in CARDS)
    assert any(key[3] == "batch" for card in CARDS for key, _ in one[card])
    for card in CARDS:
        assert same_decisions(hashed[card], one[card]), card
        assert same_decisions(rr[card], one[card]), card

    # Affinity: every key (here, one per card: its states begin alike)
    # reached one daemon. How evenly keys spread is the added-daemon test's.
    decide = [(k, up) for k, up, _, uri in hashed_calls if uri.endswith("/Decide")]
    by_key = defaultdict(set)
    for key, up in decide:
        by_key[key].add(up)
    assert decide and all(key for key, _ in decide), "the CLI sent no affinity key"
    assert all(len(ups) == 1 for ups in by_key.values()), by_key
    # Round robin spread the same keys over several daemons.
    rr_by_key = defaultdict(set)
    for key, up, _, uri in rr_calls:
        if uri.endswith("/Decide"):
            rr_by_key[key].add(up)
    assert any(len(ups) > 1 for ups in rr_by_key.values())

    def totals(rows):
        t = {k: sum(r[k] for r in rows) for k in rows[0]}
        t["positions"] = t["computed"] + t["reused"]  # every prompt position the model saw
        t["hit_ratio"] = t["reused"] / t["positions"]
        return t
    h, r = totals(hashed_work), totals(rr_work)
    # The same positions were asked of the pool (but for the warm-ups).
    assert abs(h["positions"] - r["positions"]) <= 10
    assert h["hit_ratio"] > r["hit_ratio"] and h["computed"] < r["computed"]
    figures = {"cards": CARDS, "decide_calls": len(decide), "distinct_keys": len(by_key),
               "affinity": {"totals": h, "per_daemon": hashed_work},
               "round_robin": {"totals": r, "per_daemon": rr_work},
               "computed_ratio_rr_over_affinity": r["computed"] / h["computed"]}
    print(json.dumps(figures, indent=2))
    if os.environ.get("MESA_ANYJEV_BALANCER_RESULTS"):
        Path(os.environ["MESA_ANYJEV_BALANCER_RESULTS"]).write_text(json.dumps(figures, indent=2))


def fake_annotate_args(address):
    card = CARDS[0]
    return ["annotate", "--backend", "hf", "--card", str(ROOT / "data" / "cards" / f"{card}.md"),
            "--candidates", str(ROOT / "data" / "candidates" / f"{card}.json"),
            "--set", f"client.address={address}", "--set", "backend.hf_model=fake"]


def inflight(daemon):
    return metric(daemon.metrics(), "mesa_anyjev_inflight_requests")


def test_sigterm_to_one_daemon_mid_run_fails_no_call(start_daemon, start_nginx):
    # 0.3 s per model call: a daemon holding a call is seen by polling, and
    # the run cannot end while it holds one, so the signal lands mid-run.
    daemons = [start_daemon("--set", "model.fake_delay_s=0.3", name=f"d{i}") for i in range(3)]
    lb = start_nginx(daemons)
    proc = subprocess.Popen([str(Path(CLI).resolve()), *fake_annotate_args(lb.address)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    victim = None
    while victim is None:
        assert proc.poll() is None, "the run ended before any daemon was seen holding a call"
        victim = next((d for d in daemons if inflight(d) >= 1), None)
        time.sleep(0.01)
    before = len(lb.calls())
    victim.signal(signal.SIGTERM)
    assert victim.wait(timeout=60) == 0  # its call finished within the drain
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err

    calls = lb.calls()
    # The only calls that did not answer OK are the victim's refusals while
    # it drained (UNAVAILABLE, which the CLI retried).
    assert all(st == "0" or (up == victim.address and st == "14") for _, up, st, _ in calls), calls
    owner = {key: up for key, up, _, uri in calls[:before] if uri.endswith("/Decide")}
    after = [(k, up, st) for k, up, st, uri in calls[before:] if uri.endswith("/Decide")]
    # Logged on completion: the call the victim held at the signal is the
    # one OK answer it gives after it.
    assert sum(1 for _, up, st in after if up == victim.address and st == "0") <= 1
    moved = [(k, up) for k, up, st in after if up != victim.address]
    assert moved, "no call came after the signal"
    # The victim's keys moved; the others' stayed where they were.
    for key, up in moved:
        if key in owner and owner[key] != victim.address:
            assert up == owner[key], (key, owner[key], up)

    # Nothing was lost: the same run against one daemon.
    lone = start_daemon(name="lone")
    single = run_cli(*fake_annotate_args(lone.address), timeout=600)
    assert single.returncode == 0, single.stderr
    assert avus(out) == avus(single.stdout) and avus(out)


def tokenize_with_keys(address, keys):
    with grpc.insecure_channel(address) as channel:
        from conftest import inference_pb2_grpc
        stub = inference_pb2_grpc.InferenceStub(channel)
        for key in keys:
            stub.Tokenize(pb.TokenizeRequest(texts=[b"x"]), timeout=30,
                          metadata=[("mesa-anyjev-affinity", key)])


def nginx_chash(servers, key):
    """The upstream nginx's `hash ... consistent` picks for key (ketama as in
    ngx_http_upstream_hash_module): 160 points per server, each the CRC-32 of
    host, a NUL, port and the previous point (little endian); a key goes to
    the first point at or after its own CRC-32, wrapping around."""
    points = {}
    for server in servers:
        host, port = server.rsplit(":", 1)
        base, prev = host.encode() + b"\0" + port.encode(), 0
        for _ in range(160):
            prev = zlib.crc32(base + struct.pack("<I", prev))
            points.setdefault(prev, server)  # nginx keeps the first of equal points
    ring = sorted(points)
    at = bisect.bisect_left(ring, zlib.crc32(key.encode()))
    return points[ring[at % len(ring)]]


def test_an_added_daemon_takes_only_its_share_of_keys(start_daemon, start_nginx):
    daemons = [start_daemon(name=f"d{i}") for i in range(3)]
    lb = start_nginx(daemons)
    keys = [f"{i:016x}" for i in range(300)]
    tokenize_with_keys(lb.address, keys)
    first = {k: up for k, up, _, _ in lb.calls(at_least=len(keys))}
    three = [d.address for d in daemons]
    # nginx routed every key where its ring puts it, over all three daemons.
    assert first == {k: nginx_chash(three, k) for k in keys}
    share = Counter(first.values())
    assert len(share) == 3, share

    added = start_daemon(name="added")
    lb.reload([*daemons, added])
    n = len(lb.calls())
    tokenize_with_keys(lb.address, keys)
    second = {k: up for k, up, _, _ in lb.calls(at_least=n + len(keys))[n:]}
    assert second == {k: nginx_chash([*three, added.address], k) for k in keys}
    # Consistent hashing: a key moves only to the new daemon (the ring's
    # other points stay); how many it takes depends on where its port's
    # points fall, which the oracle above fixes.
    moved = [k for k in keys if second[k] != first[k]]
    assert moved and all(second[k] == added.address for k in moved)
    print(json.dumps({"keys": len(keys), "share_of_three": sorted(share.values()),
                      "moved_to_the_fourth": len(moved)}))
    assert metric(added.metrics(), "mesa_anyjev_requests_total", method="Tokenize", code="OK") == len(moved)
