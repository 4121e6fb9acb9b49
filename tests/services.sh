#!/usr/bin/env bash
# Installs and starts what the test suite uses, from this machine's own package
# manager, and is quiet when all is already there:
#   - PostgreSQL (Debian's postgresql): trust for loopback, the cluster started,
#     the `test` database created;
#   - Chromium (browser tests);
#   - with the argument `nginx`, nginx alone instead (`make bench-front`).
# The Python peers (SMG, sglang-router, vllm-router, SGLang's publisher,
# grpcio, pyzmq) come from PyPI, pinned, through tests/peers/setup.sh.
# Run as root or with sudo. Tests that still lack a service skip with a message
# saying how to run them — or fail under CI=true — so this script never fails
# the run itself.
set -u

sudo_cmd=""
[ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && sudo_cmd="sudo"
apt_updated=""
apt_install() {
  command -v apt-get >/dev/null 2>&1 || { echo "services: no apt-get; install $* by hand"; return 1; }
  if [ -z "$apt_updated" ]; then
    $sudo_cmd apt-get update -qq >/dev/null 2>&1 || true
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "$@" >/dev/null 2>&1 ||
    { echo "services: could not install $*; the tests that need them skip (or fail under CI=true)"; return 1; }
}

# Opt-in, never on the test suite's path: `tests/services.sh nginx` installs
# Debian's nginx alone (the reference reverse proxy of `make bench-front`,
# which runs it with a config of its own on 127.0.0.1). The package's own
# service is kept from starting, so that nothing comes to listen on port 80:
# a policy-rc.d that refuses every start (exit 101) stands while apt runs,
# and whatever was there before is put back afterwards.
install_nginx() {
  if command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; then
    return 0
  fi
  local policy=/usr/sbin/policy-rc.d saved=""
  if [ -e "$policy" ]; then
    saved="$(mktemp)"
    $sudo_cmd cp -p "$policy" "$saved" || return 1
  fi
  restore_policy() {
    if [ -n "$saved" ]; then
      $sudo_cmd cp -p "$saved" "$policy" && rm -f "$saved"
    else
      $sudo_cmd rm -f "$policy"
    fi
  }
  trap restore_policy EXIT
  printf '#!/bin/sh\n# tests/services.sh nginx: no service starts while packages install\nexit 101\n' |
    $sudo_cmd tee "$policy" >/dev/null && $sudo_cmd chmod 755 "$policy"
  echo "services: installing Debian's nginx (its service kept from starting)"
  apt_install nginx
  restore_policy
  trap - EXIT
}
if [ "${1:-}" = nginx ]; then
  install_nginx
  exit 0
fi

pg_ready() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }

# PostgreSQL: installed, trusted on loopback, running, with a `test` database.
if ! pg_ready || ! psql -h 127.0.0.1 -U postgres -d test -tAc 'select 1' >/dev/null 2>&1; then
  if ! command -v pg_ctlcluster >/dev/null 2>&1 || ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
    echo "services: installing Debian's postgresql"
    apt_install postgresql postgresql-client
  fi
  version="$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n1)"
  if [ -n "$version" ]; then
    hba="/etc/postgresql/$version/main/pg_hba.conf"
    marker="# loadreporter tests: trust on loopback (test machines only)"
    if [ -f "$hba" ] && ! grep -qF "$marker" "$hba"; then
      echo "services: trusting loopback in $hba (test machines only)"
      tmp="$(mktemp)"
      {
        echo "$marker"
        echo "local   all   all                  trust"
        echo "host    all   all   127.0.0.1/32   trust"
        echo "host    all   all   ::1/128        trust"
        cat "$hba"
      } >"$tmp"
      $sudo_cmd cp "$tmp" "$hba"
      rm -f "$tmp"
      reload=1
    fi
    if ! pg_ready; then
      echo "services: starting PostgreSQL $version"
      $sudo_cmd pg_ctlcluster --skip-systemctl-redirect "$version" main start >/dev/null 2>&1 ||
        echo "services: PostgreSQL $version did not start (see /var/log/postgresql/)"
      for _ in $(seq 1 50); do pg_ready && break; sleep 0.2; done
    elif [ -n "${reload:-}" ]; then
      $sudo_cmd pg_ctlcluster --skip-systemctl-redirect "$version" main reload >/dev/null 2>&1 || true
    fi
    if pg_ready && ! psql -h 127.0.0.1 -U postgres -d postgres -tAc "select 1 from pg_database where datname = 'test'" 2>/dev/null | grep -q 1; then
      echo "services: creating the test database"
      createdb -h 127.0.0.1 -U postgres test || echo "services: could not create the test database"
    fi
  fi
fi

# Debian packages the tests use.
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  echo "services: installing Debian's ${missing[*]} for the tests"
  apt_install "${missing[@]}"
fi
exit 0
