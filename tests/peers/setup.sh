#!/usr/bin/env bash
# Makes one Python venv per requirements file of this folder, for the tests
# that run the real peers (SMG, sglang-router, vllm-router, SGLang's LoadStat
# publisher, grpcio and pyzmq clients):
#
#   tests/peers/NAME.txt  ->  .venv-peers/NAME/
#
# One venv per file because the peers' console scripts collide
# (sglang-router installs an `smg` script of its own). Each file is the whole
# environment, every package pinned with ==, installed with --no-deps and
# wheels only: nothing is resolved or compiled here, and SGLang's engine
# wheel comes without torch and the rest it never needs for its publisher.
#
# Idempotent and quiet when up to date: a venv is remade only when its
# file's sha256 or the interpreter changed (the stamp
# .venv-peers/NAME/.stamp holds both). When an install fails the venv is
# removed and .venv-peers/NAME.failed says why, first word "outside" (PyPI
# unreachable, a machine other than the CPython 3.11 on x86_64 Linux the
# pins are checked on, no python3) or "project" (anything else, a wrong pin
# first): the tests skip naming it, and under CI=true fail unless the cause
# is outside the project. The script itself never fails the run.
#
# PEERS_PYTHON picks the interpreter (default: python3 on PATH).
set -u

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venvs="$root/.venv-peers"
python="${PEERS_PYTHON:-python3}"
mkdir -p "$venvs"

# One run at a time: a second `make test` waits for the first's installs.
exec 9>"$venvs/.lock"
command -v flock >/dev/null 2>&1 && flock 9

fail() { # name, cause (outside|project), reason
  rm -rf "${venvs:?}/$1"
  printf '%s %s\n' "$2" "$3" >"$venvs/$1.failed"
  echo "peers: $1 not installed ($2): $3"
}

if ! pyver="$("$python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null)"; then
  for req in "$here"/*.txt; do
    fail "$(basename "$req" .txt)" outside "no Python interpreter: $python did not run"
  done
  exit 0
fi

# install NAME REQ makes one venv; the venvs are made side by side (pip
# spends most of its time waiting on downloads).
install() {
  name="$1" req="$2" dir="$venvs/$1" want="$3"
  echo "peers: installing $name from tests/peers/$name.txt into .venv-peers/$name (Python $pyver)"
  rm -rf "$dir" "$venvs/$name.failed"
  log="$venvs/$name.log"
  if ! "$python" -m venv "$dir" >"$log" 2>&1; then
    fail "$name" outside "$python -m venv failed (the interpreter lacks venv/ensurepip; see .venv-peers/$name.log)"
    return
  fi
  if ! "$dir/bin/python" -m pip install --quiet --no-input --disable-pip-version-check \
    --no-deps --only-binary=:all: -r "$req" >>"$log" 2>&1; then
    reason="$(grep -m1 -E 'ERROR|error:' "$log" | cut -c1-300)"
    if grep -qE 'NewConnectionError|Max retries exceeded|Temporary failure in name resolution|Network is unreachable|ConnectTimeout|ReadTimeout|HTTP error 5[0-9][0-9]' "$log"; then
      fail "$name" outside "pip could not reach PyPI: ${reason:-see the log}"
    elif grep -qE 'No matching distribution|Could not find a version that satisfies|is not a supported wheel' "$log" &&
      { [ "$(uname -m)" != x86_64 ] || [ "${pyver%.*}" != 3.11 ]; }; then
      fail "$name" outside "no pinned wheel for Python $pyver on $(uname -m) (the pins are checked on CPython 3.11, x86_64 Linux): ${reason:-see the log}"
    else
      fail "$name" project "pip install -r tests/peers/$name.txt failed: ${reason:-see the log}"
    fi
    return
  fi
  echo "$want" >"$dir/.stamp"
  rm -f "$log"
}

for req in "$here"/*.txt; do
  name="$(basename "$req" .txt)"
  dir="$venvs/$name"
  want="$(sha256sum "$req" | cut -d' ' -f1) python-$pyver"
  if [ -f "$dir/.stamp" ] && [ "$(cat "$dir/.stamp")" = "$want" ] && [ -x "$dir/bin/python" ]; then
    continue
  fi
  install "$name" "$req" "$want" &
done
wait
exit 0
