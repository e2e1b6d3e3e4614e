"""Every command line that README.md and docs/cli.md show works as written.

Each ```sh block of a document is run line by line, in order, in one bash
session from the repository's root: the daemon started in the background
by one line serves the lines after it, `kill %1; wait %1` stops it. A line
must exit 0, or the code its trailing comment names (`# exit 1`). The
session runs in a network namespace of its own, so the documents' default
ports (127.0.0.1:50151 for the daemon, :9464 for metrics) are free whatever
else runs on this machine, and under a fresh HOME, so the stores are the
documented defaults and start empty.

Synopsis blocks (plain ``` blocks of `mesa-anyjev <command> [flags]`) are
checked against the command's own --help: every flag they name exists."""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import CLI

DOCS = ["README.md", "docs/cli.md"]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def blocks(doc, language):
    return [body for lang, body in FENCE.findall(Path(doc).read_text()) if lang == language]


def command_lines(doc):
    lines = []
    for body in blocks(doc, "sh"):
        for line in body.splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                lines.append(line)
    return lines


def expected_exit(line):
    m = re.search(r"#\s*exit (\d+)", line)
    return int(m.group(1)) if m else 0


def session_script(lines, out_dir):
    """Each line verbatim, its output kept, its exit code appended to codes."""
    parts = ["set -o pipefail", f"exec 3>{out_dir}/codes"]
    for i, line in enumerate(lines):
        parts.append(f"{{\n{line}\n}} >{out_dir}/{i}.out 2>{out_dir}/{i}.err; echo $? >&3")
    return "\n".join(parts) + "\n"


def isolated():
    """How to run a command in a network namespace of its own."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return None
    probe = subprocess.run(["unshare", "--net", "true"], capture_output=True)
    return ["unshare", "--net"] if probe.returncode == 0 else None


@pytest.mark.parametrize("doc", DOCS)
def test_every_shown_command_line_works(doc, tmp_path):
    lines = command_lines(doc)
    assert len(lines) >= 8, f"{doc}: its sh blocks went missing"
    namespace = isolated()
    if namespace is None:
        pytest.skip("needs unshare --net (root or user namespaces) for the default ports")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    script = tmp_path / "session.sh"
    script.write_text(session_script(lines, out_dir))
    build = Path(CLI).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MESA_ANYJEV_", "MESA_LLM_"))}
    env.pop("STATE_DIRECTORY", None)
    env.pop("XDG_STATE_HOME", None)
    env["HOME"] = str(tmp_path / "home")
    (tmp_path / "home").mkdir()
    # The documents name build/ at the repository's root; a build elsewhere
    # is put on the PATH the same way.
    env["PATH"] = f"{build}/client:{build}/server:{env['PATH']}"
    run = subprocess.run([*namespace, "bash", "-c", f"ip link set lo up && bash {script}"],
                         cwd=Path.cwd(), env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr
    codes = [int(c) for c in (out_dir / "codes").read_text().split()]
    assert len(codes) == len(lines), run.stderr
    failed = []
    for i, (line, code) in enumerate(zip(lines, codes)):
        if code != expected_exit(line):
            err = (out_dir / f"{i}.err").read_text()[-800:]
            failed.append(f"exit {code}: {line}\n{err}")
    assert not failed, "\n\n".join(failed)


def synopses(doc):
    """(command words, flags) for each `mesa-anyjev ...` synopsis."""
    out = []
    for body in blocks(doc, ""):
        current = None
        for line in body.splitlines():
            if line.startswith("mesa-anyjev "):
                words = []
                for word in line.split()[1:]:
                    if not re.fullmatch(r"[a-z][a-z-]*", word):
                        break
                    words.append(word)
                current = (words, set())
                out.append(current)
            if current is not None:
                current[1].update(re.findall(r"(--[a-z][a-z-]*)", line))
    return out


@pytest.mark.parametrize("doc", DOCS)
def test_every_flag_of_a_synopsis_exists(doc):
    found = synopses(doc)
    if doc == "docs/cli.md":
        assert len(found) >= 8
    for words, flags in found:
        help_text = subprocess.run([CLI, *words, "--help"], capture_output=True,
                                   text=True).stdout
        missing = sorted(f for f in flags if f not in help_text)
        assert not missing, f"mesa-anyjev {' '.join(words)}: {missing}"
