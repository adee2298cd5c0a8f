"""Print the first fenced code block under a README heading, so CI runs the README's own quickstarts.

    python3 .ci/readme_block.py README.md "Quickstart: Python" > quickstart.py
"""

import re
import sys


def block(text: str, heading: str) -> str:
    start = re.search(rf"^#+ {re.escape(heading)}\s*$", text, re.MULTILINE)
    if start is None:
        raise SystemExit(f"no heading {heading!r}")
    fence = re.search(r"^```[a-z]*\n(.*?)^```", text[start.end() :], re.MULTILINE | re.DOTALL)
    if fence is None:
        raise SystemExit(f"no code block under {heading!r}")
    return fence.group(1)


if __name__ == "__main__":
    path, heading = sys.argv[1], sys.argv[2]
    with open(path, encoding="utf-8") as f:
        sys.stdout.write(block(f.read(), heading))
