"""docs/trace.md stays true: scripts/trace_stops.py passes on the real page,
and fails (naming the doc line, the stop and what is wrong) on copies with a
broken stop: a moved line (reported, and fixed by --fix), an anchor that is
gone (reported, not fixable) or not unique, and a file that is gone."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "trace_stops.py"
STOP = re.compile(r"^- \[(?P<path>[^\]:]+):(?P<line>\d+)\]\(\.\./[^)]+\) `(?P<anchor>[^`]+)`")


def check(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)],
                          capture_output=True, text=True, timeout=60)


def stops(doc):
    out = []
    for n, text in enumerate(doc.read_text(encoding="utf-8").split("\n"), 1):
        m = STOP.match(text)
        if m:
            out.append((n, m["path"], int(m["line"]), m["anchor"]))
    return out


def copy_tree(tmp_path):
    """The page and every file it names, under tmp_path as a repository."""
    doc = tmp_path / "docs" / "trace.md"
    doc.parent.mkdir(parents=True)
    shutil.copy(ROOT / "docs" / "trace.md", doc)
    for _, path, _, _ in stops(doc):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / path, tmp_path / path)
    return doc


def replace_line(doc, n, old, new):
    lines = doc.read_text(encoding="utf-8").split("\n")
    assert old in lines[n - 1]
    lines[n - 1] = lines[n - 1].replace(old, new)
    doc.write_text("\n".join(lines), encoding="utf-8")


def test_real_page_holds():
    doc = ROOT / "docs" / "trace.md"
    found = stops(doc)
    assert 40 <= len(found) <= 70, f"{len(found)} stops: one page is 40-70"
    r = check("--doc", doc, "--root", ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{len(found)} stops hold" in r.stdout
    # The default doc and root are the repository's own.
    assert check().returncode == 0


def test_moved_line_is_reported_and_fixed(tmp_path):
    doc = copy_tree(tmp_path)
    n, path, line, anchor = stops(doc)[3]
    # The code moved: two lines inserted at the top of the stop's file.
    source = tmp_path / path
    source.write_text("\n\n" + source.read_text(encoding="utf-8"), encoding="utf-8")
    r = check("--doc", doc, "--root", tmp_path)
    assert r.returncode == 1
    assert (f"docs/trace.md:{n}: {path}:{line}: anchor `{anchor}` is not on "
            f"line {line} but on {line + 2}") in r.stdout, r.stdout
    r = check("--fix", "--doc", doc, "--root", tmp_path)
    assert r.returncode == 0, r.stdout
    assert f"docs/trace.md:{n}: {path}:{line}: fixed: now line {line + 2}" in r.stdout
    text = doc.read_text(encoding="utf-8").split("\n")[n - 1]
    assert f"[{path}:{line + 2}](../{path}#L{line + 2})" in text
    assert check("--doc", doc, "--root", tmp_path).returncode == 0


def test_wrong_line_number_in_the_page_is_fixed(tmp_path):
    doc = copy_tree(tmp_path)
    n, path, line, anchor = stops(doc)[10]
    wrong = line + 5
    replace_line(doc, n, f"[{path}:{line}](../{path}#L{line})",
                 f"[{path}:{wrong}](../{path}#L{wrong})")
    r = check("--doc", doc, "--root", tmp_path)
    assert r.returncode == 1
    assert f"docs/trace.md:{n}: {path}:{wrong}: anchor" in r.stdout, r.stdout
    assert check("--fix", "--doc", doc, "--root", tmp_path).returncode == 0
    assert doc.read_text(encoding="utf-8") == (ROOT / "docs" / "trace.md").read_text(
        encoding="utf-8")


def test_missing_anchor_is_reported_not_fixed(tmp_path):
    doc = copy_tree(tmp_path)
    n, path, line, anchor = stops(doc)[5]
    replace_line(doc, n, f"`{anchor}`", "`NoSuchFunctionAnywhere(`")
    before = doc.read_text(encoding="utf-8")
    for args in ([], ["--fix"]):
        r = check(*args, "--doc", doc, "--root", tmp_path)
        assert r.returncode == 1
        assert (f"docs/trace.md:{n}: {path}:{line}: anchor "
                "`NoSuchFunctionAnywhere(` not found in the file") in r.stdout, r.stdout
    assert doc.read_text(encoding="utf-8") == before


def test_anchor_not_unique_is_reported(tmp_path):
    doc = copy_tree(tmp_path)
    n, path, line, anchor = stops(doc)[0]
    source = tmp_path / path
    source.write_text(source.read_text(encoding="utf-8") + "// " + anchor + "\n",
                      encoding="utf-8")
    r = check("--fix", "--doc", doc, "--root", tmp_path)
    assert r.returncode == 1
    assert f"docs/trace.md:{n}: {path}:{line}: anchor `{anchor}` occurs 2 times" in r.stdout


def test_missing_file_is_reported(tmp_path):
    doc = copy_tree(tmp_path)
    n, path, line, _ = stops(doc)[-1]
    (tmp_path / path).unlink()
    r = check("--fix", "--doc", doc, "--root", tmp_path)
    assert r.returncode == 1
    assert f"docs/trace.md:{n}: {path}:{line}: no such file" in r.stdout, r.stdout


def test_malformed_stop_is_reported(tmp_path):
    doc = copy_tree(tmp_path)
    n, path, line, _ = stops(doc)[2]
    replace_line(doc, n, f"(../{path}#L{line})", f"({path}#L{line})")
    r = check("--doc", doc, "--root", tmp_path)
    assert r.returncode == 1
    assert f"docs/trace.md:{n}: " in r.stdout and "not a stop of the form" in r.stdout


def test_page_without_stops_fails(tmp_path):
    doc = tmp_path / "docs" / "trace.md"
    doc.parent.mkdir(parents=True)
    doc.write_text("# A trace\n\nNo stops here.\n", encoding="utf-8")
    r = check("--doc", doc, "--root", tmp_path)
    assert r.returncode == 1
    assert "docs/trace.md: no stops found" in r.stdout
