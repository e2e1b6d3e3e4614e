"""Crash safety of the bundle store: bundle_writer puts and promotes (and
rolls back) in a loop and is SIGKILLed at random moments, 60 times (200 in
`make stress`: MESA_ANYJEV_BUNDLE_KILLS). After
every kill, checked here in Python (not by the store's own code): every
v<N> directory is whole (each file's sha256 matches its manifest), every
CURRENT pointer names a whole version, and the next writer opens the store,
removes the dead writer's temporaries and puts a new version."""
import hashlib
import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

WRITER = os.environ.get("MESA_ANYJEV_BUNDLE_WRITER", "build/tests/bundle_writer")
KILLS = int(os.environ.get("MESA_ANYJEV_BUNDLE_KILLS", "60"))


def whole(version_dir: Path) -> bool:
    manifest = json.loads((version_dir / "manifest.json").read_text())
    assert manifest["version"] == int(version_dir.name[1:])
    assert "artifacts.json" in manifest["files"]
    for name, digest in manifest["files"].items():
        data = (version_dir / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest, f"{version_dir.name}/{name}"
    json.loads((version_dir / "artifacts.json").read_text())
    return True


def check_store(lock_dir: Path):
    versions = sorted(int(p.name[1:]) for p in lock_dir.glob("v*") if p.name[1:].isdigit())
    for n in versions:
        assert whole(lock_dir / f"v{n}")
    for pointer in (lock_dir / "current").glob("*"):
        if pointer.name.startswith("."):
            continue  # a temporary: never read as a pointer
        lines = pointer.read_text().splitlines()
        assert lines and all(line.startswith("v") for line in lines), lines
        assert whole(lock_dir / lines[0]), f"{pointer.name} -> {lines[0]}"
    return versions


def test_sigkill_at_random_points_leaves_a_whole_store(tmp_path):
    rng = random.Random(7)
    root = tmp_path / "bundles"
    lock_dir = root / "fake" / "0190586d"
    args = ["--root", str(root), "--question", "term.fits"]
    temps_seen = 0
    for i in range(KILLS):
        proc = subprocess.Popen([WRITER, "loop", *args], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        time.sleep(rng.uniform(0.002, 0.06))
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL, err.decode()
        temps_seen += sum(1 for p in lock_dir.rglob(".*tmp-*"))
        check_store(lock_dir)
        # The next writer: opens (cleaning up), verifies with the store's
        # own reader, and puts a version on top of whatever was left.
        check = subprocess.run([WRITER, "check", *args], capture_output=True, timeout=30)
        assert check.returncode == 0, (i, check.stdout.decode(), check.stderr.decode())
        report = json.loads(check.stdout)
        assert report["bad"] == [] and isinstance(report["put"], int)
        assert not list(lock_dir.rglob(".*tmp-*")), "dead writer's temporaries left"
    versions = check_store(lock_dir)
    current = (lock_dir / "current" / "term.fits").read_text().splitlines()
    # The loop made real progress between kills, and the kills did land
    # inside writes now and then (temporaries were found and removed).
    assert len(versions) > KILLS and len(current) >= 1
    assert temps_seen > 0
