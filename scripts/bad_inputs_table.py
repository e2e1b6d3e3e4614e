"""Renders the failed calls that the end-to-end suites recorded (conftest's
MESA_ANYJEV_ERROR_LOG) as a Markdown table: one row per bad input, the RPC,
the status code the daemon answered and its message (docs/reliability.md).

    MESA_ANYJEV_ERROR_LOG=/tmp/bad.jsonl pytest tests/e2e/test_errors.py ...
    python scripts/bad_inputs_table.py /tmp/bad.jsonl
"""
import json
import sys


def main(path):
    rows, seen = [], set()
    for line in open(path, encoding="utf-8"):
        r = json.loads(line)
        key = (r["test"], r["method"], r["code"], r["message"])
        if key in seen:
            continue
        seen.add(key)
        rows.append(r)
    print("| # | Test (case) | RPC | Code | Message |")
    print("| ---: | --- | --- | --- | --- |")
    for i, r in enumerate(rows, 1):
        test = r["test"].split("::", 1)[-1]
        message = r["message"].replace("|", "\\|").replace("\n", " ")
        if len(message) > 110:
            message = message[:107] + "..."
        print(f"| {i} | `{test}` | {r['method'].rsplit('/', 1)[-1]} | {r['code']} | {message} |")
    print(f"\n{len(rows)} bad inputs.", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1])
