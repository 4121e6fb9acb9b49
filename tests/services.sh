#!/usr/bin/env bash
# Starts or installs what the test suite uses, from this machine's own package
# manager: PostgreSQL when installed but stopped, Debian's Chromium for the
# browser tests when missing. Tests that still lack a service skip with a
# message saying how to run them — or fail under CI=true — so this script never
# fails the run itself.
set -u
if command -v pg_ctlcluster >/dev/null 2>&1 && ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  echo "services: starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
fi
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  echo "services: installing Debian's chromium for the browser tests"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq >/dev/null 2>&1 || true
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq chromium >/dev/null 2>&1 ||
    echo "services: could not install chromium; browser tests will skip (or fail under CI=true)"
fi
exit 0
