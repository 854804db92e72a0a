#!/usr/bin/env bash
# Make sure a Debian package a test suite needs is installed, with apt-get, as root or through
# sudo without a password:  ensure-debian-package.sh PACKAGE PROBE WHAT
#   PACKAGE  the package (chromium, postgresql)
#   PROBE    a shell test that is true once it is there ('[ -x /usr/bin/chromium ]')
#   WHAT     the suites that need it, for the message when it cannot be installed
# Without it those suites say plainly that they were skipped; this never fails the run.
set -uo pipefail
package=$1 probe=$2 what=$3

if eval "$probe"; then exit 0; fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure $package: no apt-get here; $what will be skipped" >&2
  exit 0
fi
as_root=""
if [ "$(id -u)" -ne 0 ]; then
  if sudo -n true 2>/dev/null; then as_root="sudo -n"; else
    echo "ensure $package: not root and no passwordless sudo; $what will be skipped" >&2
    exit 0
  fi
fi
echo "ensure $package: installing Debian's $package" >&2
$as_root apt-get update -qq >/dev/null 2>&1 || true
if DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -qq --no-install-recommends "$package" >/dev/null 2>&1 && eval "$probe"; then
  echo "ensure $package: installed" >&2
else
  echo "ensure $package: apt-get install $package failed; $what will be skipped" >&2
fi
exit 0
