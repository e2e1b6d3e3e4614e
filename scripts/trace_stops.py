"""Checks that every stop of docs/trace.md still names real code.

A stop is a list item of the form

    - [path/to/file.cc:123](../path/to/file.cc#L123) `anchor` — what happens.

and holds when the file exists, it has line 123, the anchor is on that line,
and the anchor occurs exactly once in the file (so a moved line can be found
again). Each failure is printed as

    docs/trace.md:<md line>: <path>:<line>: <what is wrong>

and the exit status is 1 if there is any. With --fix, a stop whose anchor
moved (and is still unique in its file) is rewritten to the anchor's line,
in the link text and the #L anchor both; the stops it cannot fix (file gone,
anchor gone or not unique) are reported as failures.

    python3 scripts/trace_stops.py [--fix] [--doc DOC] [--root ROOT]

DOC defaults to ROOT/docs/trace.md, ROOT to this script's repository.
"""
import argparse
import re
import sys
from pathlib import Path

# A line that means to be a stop: a list item whose link text is path:line.
STOP_LIKE = re.compile(r"^- \[[^\]]*:\d+\]\(")
STOP = re.compile(
    r"^- \[(?P<path>[^\]:\s]+):(?P<line>\d+)\]"
    r"\(\.\./(?P<target>[^)#\s]+)#L(?P<target_line>\d+)\) "
    r"`(?P<anchor>[^`]+)` — \S")


def shown(doc, root):
    try:
        return str(doc.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(doc)


def check_stop(match, root, lines_of):
    """(problem or None, new line or None) for one parsed stop."""
    path, line = match["path"], int(match["line"])
    if match["target"] != path or int(match["target_line"]) != line:
        return (f"the link (../{match['target']}#L{match['target_line']}) "
                f"is not the link text's {path}:{line}"), None
    file = (root / path).resolve()
    if root.resolve() not in file.parents or not file.is_file():
        return "no such file", None
    if path not in lines_of:
        lines_of[path] = file.read_text(encoding="utf-8").splitlines()
    lines = lines_of[path]
    anchor = match["anchor"]
    count = sum(text.count(anchor) for text in lines)
    if count == 0:
        return f"anchor `{anchor}` not found in the file", None
    if count > 1:
        return f"anchor `{anchor}` occurs {count} times in the file", None
    found = next(i for i, text in enumerate(lines, 1) if anchor in text)
    if line < 1 or line > len(lines):
        return (f"no line {line} (the file has {len(lines)}); "
                f"the anchor is on line {found}"), found
    if found != line:
        return f"anchor `{anchor}` is not on line {line} but on {found}", found
    return None, None


def run(doc, root, fix):
    if not doc.is_file():
        print(f"{doc}: no such file", file=sys.stderr)
        return 1
    name = shown(doc, root)
    md = doc.read_text(encoding="utf-8").split("\n")
    lines_of = {}
    failures, fixed, stops = 0, 0, 0
    for i, text in enumerate(md):
        if not STOP_LIKE.match(text):
            continue
        stops += 1
        match = STOP.match(text)
        if match is None:
            print(f"{name}:{i + 1}: {text[2:60]}: not a stop of the form "
                  "- [path:N](../path#LN) `anchor` — sentence")
            failures += 1
            continue
        problem, moved = check_stop(match, root, lines_of)
        if problem is None:
            continue
        where = f"{name}:{i + 1}: {match['path']}:{match['line']}"
        if fix and moved is not None:
            path, old = match["path"], match["line"]
            md[i] = text.replace(f"[{path}:{old}](../{path}#L{old})",
                                 f"[{path}:{moved}](../{path}#L{moved})", 1)
            print(f"{where}: fixed: now line {moved}")
            fixed += 1
            continue
        print(f"{where}: {problem}")
        failures += 1
    if stops == 0:
        print(f"{name}: no stops found")
        return 1
    if fixed:
        doc.write_text("\n".join(md), encoding="utf-8")
    if failures:
        print(f"{name}: {failures} of {stops} stops fail"
              + (f" ({fixed} fixed)" if fixed else ""))
        return 1
    print(f"{name}: {stops} stops hold" + (f" ({fixed} fixed)" if fixed else ""))
    return 0


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fix", action="store_true",
                        help="rewrite stops whose anchor moved to its line")
    parser.add_argument("--root", type=Path,
                        default=Path(__file__).resolve().parent.parent,
                        help="the repository the stops' paths are in")
    parser.add_argument("--doc", type=Path, default=None,
                        help="the trace page (default ROOT/docs/trace.md)")
    args = parser.parse_args(argv)
    doc = args.doc if args.doc is not None else args.root / "docs" / "trace.md"
    return run(doc, args.root, args.fix)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
