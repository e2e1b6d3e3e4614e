"""A local HTTP server that answers as an older vLLM behind LiteLLM does:
POST /v1/completions with top_logprobs dicts (token text -> logprob), HTTP
400 when logprobs exceeds vLLM's cap of 20 or the request names
logprob_token_ids, GET /health/liveliness. The real chain (LiteLLM and vLLM
0.32, tests/e2e/test_real_gateway.py) serves everything they can be made to
do; this server stays for what they cannot be made to do on demand or
cannot show: 429 with Retry-After, 5xx, garbage bodies, resets, slow and
gathered answers, TLS, redirects, missing labels on a chosen token, a server
that refuses logprob_token_ids, and what we put on the wire (the key header,
request bodies). Shared by the gateway, doctor, router and composite tests."""
import hashlib
import http.server
import json
import math
import socket
import ssl
import threading

MAX_LOGPROBS = 20  # vLLM's default --max-logprobs

# Exactly 20 candidates: the server's "top 20 over the whole vocabulary".
CANDIDATES = ["A", "B", "C", "D", "E", "F", "G", "H", " Yes", " No", "Yes",
              "No", "1", "2", "3", "4", "5", "The", "I", "It"]


def expected_logprobs(prompt):
    """Deterministic scores, log-softmaxed with a unit of mass left for the
    rest of the vocabulary."""
    scores = {}
    for tok in CANDIDATES:
        digest = hashlib.sha256(f"{prompt}|{tok}".encode()).digest()
        scores[tok] = int.from_bytes(digest[:4], "big") / 2**32 * 6.0
    norm = math.log(1.0 + sum(math.exp(s) for s in scores.values()))
    return {tok: s - norm for tok, s in scores.items()}


class Gateway:
    """A ThreadingHTTPServer on 127.0.0.1, port 0. `script` is a list of
    behaviours used one per request (then "ok"): ok, raw (byte-level keys),
    omit:<tok>, status:<code>, slow:<seconds>, garbage, reset, gather:<n>
    (answer once n requests are open at once; 500 if they never are)."""

    def __init__(self, script=(), tls=None, redirect_to=None):
        self.script = list(script)
        self.redirect_to = redirect_to
        self.default = "ok"
        self.requests = []
        self.probes = []  # label-readout probes (logprob_token_ids), refused
        self.gets = []
        self.barrier = None
        self.gathered = 0
        self.lock = threading.Lock()
        gateway = self

        class Handler(http.server.BaseHTTPRequestHandler):
            # Keep-alive, as vLLM and LiteLLM serve: every answer has a
            # Content-Length, so a client may reuse its connection.
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                with gateway.lock:
                    gateway.gets.append({"path": self.path,
                                         "authorization": self.headers.get("Authorization")})
                if self.path == "/health/liveliness" and gateway.default != "status:503":
                    self._send(200, json.dumps("I'm alive!"))
                else:
                    self._send(503 if self.path == "/health/liveliness" else 404, "{}")

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                if "logprob_token_ids" in body:
                    # As a server without vLLM's logprob_token_ids (before
                    # 0.32, or another OpenAI-compatible one) answers the
                    # clients' start-up probe; kept apart from `requests`.
                    with gateway.lock:
                        gateway.probes.append(body)
                    self._send(400, json.dumps({"object": "error", "message": (
                        "1 validation error: logprob_token_ids: Extra inputs are "
                        "not permitted")}))
                    return
                with gateway.lock:
                    gateway.requests.append(
                        {"path": self.path, "body": body,
                         "authorization": self.headers.get("Authorization"),
                         "peer": self.client_address})
                    action = gateway.script.pop(0) if gateway.script else gateway.default
                if body.get("logprobs", 0) > MAX_LOGPROBS:
                    self._send(400, json.dumps({"object": "error", "message": (
                        f"logprobs {body['logprobs']} is greater than max allowed: "
                        f"{MAX_LOGPROBS}")}))
                    return
                if gateway.redirect_to is not None:
                    self.send_response(307)
                    self.send_header("Location", gateway.redirect_to + self.path)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if action == "reset":
                    self.connection.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    self.connection.close()
                    self.close_connection = True
                    return
                if action.startswith("status:"):
                    code = int(action.split(":")[1])
                    self._send(code, json.dumps({"object": "error", "message": f"status {code}"}),
                               retry_after="1" if code == 429 else None)
                    return
                if action == "garbage":
                    self._send(200, "{not json")
                    return
                if action.startswith("slow:"):
                    threading.Event().wait(float(action.split(":")[1]))
                if action.startswith("gather:"):
                    with gateway.lock:
                        if gateway.barrier is None:
                            gateway.barrier = threading.Barrier(int(action.split(":")[1]),
                                                                timeout=30)
                    try:
                        gateway.barrier.wait()
                    except threading.BrokenBarrierError:
                        self._send(500, json.dumps({"object": "error", "message": "alone"}))
                        return
                    with gateway.lock:
                        gateway.gathered += 1
                top = expected_logprobs(body["prompt"])
                if action.startswith("omit:"):
                    top.pop(action.split(":", 1)[1])
                if action == "raw":
                    top = {k.replace(" ", "\u0120"): v for k, v in top.items()}
                best = max(top, key=top.get)
                self._send(200, json.dumps({
                    "id": "cmpl-test", "object": "text_completion", "created": 0,
                    "model": body["model"],
                    "choices": [{"index": 0, "text": best, "logprobs": {
                        "text_offset": [len(body["prompt"])],
                        "token_logprobs": [top[best]], "tokens": [best],
                        "top_logprobs": [top]},
                        "finish_reason": "length", "stop_reason": None}],
                    "usage": {"prompt_tokens": 10, "total_tokens": 11,
                              "completion_tokens": 1}}))

            def _send(self, code, text, retry_after=None):
                data = text.encode()
                try:
                    self.send_response(code)
                    if retry_after is not None:
                        self.send_header("Retry-After", retry_after)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        scheme = "http"
        if tls is not None:  # (cert, key) PEM paths
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
