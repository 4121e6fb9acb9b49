#!/usr/bin/env bash
# Starts the local services the test suite uses, when this machine has them
# installed but stopped. Tests that need a service skip (or fail under CI=true)
# with a message saying how to run them, so this script never fails the run.
set -u
if command -v pg_ctlcluster >/dev/null 2>&1 && ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  echo "starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
fi
exit 0
