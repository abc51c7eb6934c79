#!/usr/bin/env bash
# Issue 11's table in one command: this gateway vs the provider called directly (add --litellm for LiteLLM
# in the same run). Copies the shared harness (../shared/bench, read-only) to .run/bench-harness once and
# sets it up there (wrk, nginx, its venv; with --litellm also LiteLLM from the registry), then runs
# benchmarks/gateway_overhead.py with the harness's Python. Options: see gateway_overhead.py --help.
#   benchmarks/run.sh --quick            # about 2 minutes
#   benchmarks/run.sh --litellm          # the full table beside LiteLLM (about 10 minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
harness="${BENCH_HARNESS:-$PWD/.run/bench-harness}"
shared="${BENCH_SHARED:-$PWD/../shared/bench}"
[ -d "$harness" ] || { mkdir -p "$(dirname "$harness")"; cp -r "$shared" "$harness"; }
want=""
case " $* " in *" --litellm "*) want=litellm ;; esac
if [ ! -x "$harness/.venv/bin/python" ] || { [ -n "$want" ] && [ ! -x "$harness/.venv-litellm/bin/litellm" ]; }; then
    "$harness/setup.sh" $want >&2
fi
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
exec "$harness/.venv/bin/python" benchmarks/gateway_overhead.py --harness "$harness" "$@"
