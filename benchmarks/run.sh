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
[ -d "$harness" ] || { mkdir -p "$(dirname "$harness")"; cp -r "$shared" "$harness"; chmod -R u+w "$harness"; }
want=""
case " $* " in *" --litellm "*) want=litellm ;; esac
# The harness's venvs (load tools, LiteLLM) on the interpreter the project's venv runs on (make install picks the
# distribution's optimised build when there is one): a peer on a slower build would flatter this gateway. A venv
# made with another interpreter is made again.
[ -x .venv/bin/python ] || make install >&2
base="$(.venv/bin/python -c 'import sys; print(sys._base_executable)')"
shim="$harness/.python"
mkdir -p "$shim" && ln -sfn "$base" "$shim/python3"
for venv in "$harness/.venv" "$harness/.venv-litellm"; do
    if [ -e "$venv/bin/python" ] && [ "$(readlink -f "$venv/bin/python")" != "$(readlink -f "$base")" ]; then
        rm -rf "$venv"
    fi
done
ready() { [ -x "$harness/.venv/bin/python" ] && { [ -z "$want" ] || [ -x "$harness/.venv-litellm/bin/litellm" ]; }; }
if ! ready; then
    # setup.sh ends with `pip show litellm | head -2`, which can fail on the closed pipe after a good install
    PATH="$shim:$PATH" "$harness/setup.sh" $want >&2 || ready
fi
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
exec "$harness/.venv/bin/python" benchmarks/gateway_overhead.py --harness "$harness" "$@"
