"""Issue 33 through deploy/'s nginx balancer (test_balancer.py's Nginx: the
shipped configuration, hashing the clients' affinity key) over three
daemons on the fake model: the Python client's decide_stream run of
test_pipeline.py, with one daemon sent SIGTERM (a drain) once 800 states are
done. Every state comes back exactly once and equal to the uninterrupted run
on one daemon; the calls after the drain are answered by the other two."""
import signal

from conftest import metric
from test_balancer import Nginx
from test_pipeline import SPAN, check_against, decide, reference  # noqa: F401 (fixture)


def test_through_the_balancer_with_a_daemon_draining(start_daemon, tmp_path, reference):
    daemons = [start_daemon(name=f"lb{i}") for i in range(3)]
    (tmp_path / "nginx").mkdir()
    lb = Nginx(tmp_path / "nginx", daemons)
    try:
        drained = []

        def on_progress(progress):
            if not drained and progress.states_done >= 800:
                # The daemon that has answered most so far drains.
                victim = max(daemons, key=lambda d: metric(
                    d.metrics(), "mesa_anyjev_requests_total", method="Decide", code="OK"))
                victim.signal(signal.SIGTERM)
                drained.append((victim, len(lb.calls())))

        seen = []
        results = decide(lb.address, span=SPAN, concurrency=4,
                         progress=lambda p: (seen.append(p), on_progress(p)))
        check_against(results, reference)
        victim, before = drained[0]
        assert victim.wait(timeout=120) == 0
        calls = [(up, st) for _, up, st, uri in lb.calls() if uri.endswith("/Decide")]
        # Every span was answered; the victim answered some before the
        # drain and at most the calls it held after it.
        assert sum(st == "0" for _, st in calls) >= len(results) // SPAN
        after = [(up, st) for up, st in calls[before:] if st == "0"]
        # nginx logs a call as it ends: the victim's after the signal are
        # at most the calls in flight then (concurrency 4), which it drained.
        assert sum(up == victim.address for up, _ in after) <= 4
        assert {up for up, _ in after if up != victim.address}, "no call after the drain"
        print(f"retries {seen[-1].retries}; calls after the drain by daemon: "
              f"{sorted((up, sum(u == up for u, _ in after)) for up in {u for u, _ in after})}")
    finally:
        lb.stop()
