#!/usr/bin/env bash
# Starts or installs what the test suite uses, from this machine's own package
# manager: PostgreSQL when installed but stopped, and the Debian packages the
# tests use when missing. Tests that still lack a service skip with a
# message saying how to run them — or fail under CI=true — so this script never
# fails the run itself.
set -u
if command -v pg_ctlcluster >/dev/null 2>&1 && ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  echo "services: starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
fi
# Debian packages the tests use: Chromium (browser tests), Python's zmq and
# msgpack (a real SGLang-style ZMQ publisher for the sglang-zmq source), and
# Python's grpcio (a router on gRPC C-core for the Monitor stream).
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
/usr/bin/python3 -c 'import zmq' >/dev/null 2>&1 || missing+=(python3-zmq)
/usr/bin/python3 -c 'import msgpack' >/dev/null 2>&1 || missing+=(python3-msgpack)
/usr/bin/python3 -c 'import grpc' >/dev/null 2>&1 || missing+=(python3-grpcio)
if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "services: installing Debian's ${missing[*]} for the tests"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq >/dev/null 2>&1 || true
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 ||
    echo "services: could not install ${missing[*]}; the tests that need them skip (or fail under CI=true)"
fi
exit 0
