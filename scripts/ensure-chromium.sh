#!/usr/bin/env bash
# Make sure Debian's Chromium is there for the dashboard's browser tests (never a downloaded
# browser): installed with apt-get when missing, as root or through sudo without a password.
# Without it the browser tests say plainly that they were skipped; this never fails the run.
set -uo pipefail

if [ -x /usr/bin/chromium ]; then exit 0; fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-chromium: no apt-get here; the browser tests will be skipped" >&2
  exit 0
fi
as_root=""
if [ "$(id -u)" -ne 0 ]; then
  if sudo -n true 2>/dev/null; then as_root="sudo -n"; else
    echo "ensure-chromium: not root and no passwordless sudo; the browser tests will be skipped" >&2
    exit 0
  fi
fi
echo "ensure-chromium: installing Debian's chromium" >&2
$as_root apt-get update -qq >/dev/null 2>&1 || true
if DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1; then
  echo "ensure-chromium: $(/usr/bin/chromium --version 2>/dev/null | head -1)" >&2
else
  echo "ensure-chromium: apt-get install chromium failed; the browser tests will be skipped" >&2
fi
exit 0
