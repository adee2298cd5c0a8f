#!/usr/bin/env bash
# A stranger's install: build memlane's wheel, install it into a fresh virtual environment (its dependencies
# come from PyPI) without extras, then run the README's Python and CLI quickstarts with the default embedder
# and no network at all (a network namespace of their own, where the machine allows one); then check that
# the server and bench commands name their extra, install both and run the console and the data sets.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/memlane-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Built from a copy of the tracked files, so that nothing the build writes lands in the checkout.
mkdir "$work/tree"
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$work/tree"
python3 -m pip wheel -q --no-deps -w "$work/dist" "$work/tree" >&2
wheel=$(ls "$work"/dist/memlane-*.whl)
python3 - "$wheel" <<'PY'
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
for needed in ("memlane/bench/datasets/data/locomo/locomo10.json.xz", "memlane/bench/datasets/data/locomo/README.md",
               "memlane/core/embedding/minilm_tokenizer/tokenizer.json.xz", "memlane/py.typed",
               "memlane/interfaces/http/console/static/index.html", "memlane/interfaces/http/console/static/console.css",
               "memlane/interfaces/http/console/static/js/main.js"):
    assert needed in names, f"the wheel lacks {needed}"
PY
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --upgrade pip >&2
"$work/venv/bin/python" -m pip install -q "$wheel" >&2

python3 .ci/readme_block.py README.md "Quickstart: Python" >"$work/quickstart.py"
python3 .ci/readme_block.py README.md "Quickstart: CLI" >"$work/quickstart.sh"
mkdir "$work/run"
offline=()
if unshare -n true 2>/dev/null; then
    offline=(unshare -n)
else
    echo "wheel.sh: cannot make a network namespace here; running the quickstarts with the network" >&2
fi
cd "$work/run"
# A fresh model cache: the int8 model is built from the installed package, nothing is fetched.
export MEMLANE_CACHE_DIR="$work/cache" HF_HUB_OFFLINE=1
unset MEMLANE_DATA MEMLANE_STORE MEMLANE_EMBEDDER
echo "wheel.sh: Python quickstart" >&2
"${offline[@]}" "$work/venv/bin/python" "$work/quickstart.py"
echo "wheel.sh: CLI quickstart" >&2
"${offline[@]}" env PATH="$work/venv/bin:$PATH" bash -euo pipefail "$work/quickstart.sh"
echo "wheel.sh: without the server and bench extras, their commands name the extra" >&2
for cmd in serve bench; do
    set +e
    out=$("$work/venv/bin/memlane" "$cmd" 2>&1)
    rc=$?
    set -e
    if [ "$rc" != 2 ] || ! grep -q "pip install 'memlane\[" <<<"$out" || grep -q Traceback <<<"$out"; then
        echo "wheel.sh: memlane $cmd without its extra: exit $rc, $out" >&2
        exit 1
    fi
done
"$work/venv/bin/python" -m pip install -q "$wheel[server,bench]" >&2
echo "wheel.sh: the memory console from the installed wheel" >&2
MEMLANE_STORE="$work/run/console.db" "$work/venv/bin/python" - "$work/venv/bin/memlane" <<'PY'
import re, subprocess, sys, urllib.request
cmd = [sys.argv[1], "serve", "--insecure-dev", "--embedder", "hashing", "--workers", "0", "--port", "0"]
proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
try:
    for line in proc.stderr:
        found = re.search(r"memory console at (\S+)", line)
        if found:
            break
    else:
        raise SystemExit("memlane serve did not say where the console is")
    base = found.group(1)
    for name in ("", "js/main.js", "js/views/search.js", "console.css"):
        with urllib.request.urlopen(base + name, timeout=10) as res:
            assert res.status == 200 and res.headers["Content-Security-Policy"].startswith("default-src 'self'"), name
finally:
    proc.terminate()
    proc.wait(timeout=30)
PY
echo "wheel.sh: memlane datasets" >&2
"${offline[@]}" "$work/venv/bin/memlane" datasets verify
cd "$repo"
