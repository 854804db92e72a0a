#!/usr/bin/env bash
# Make sure the machine's own PostgreSQL server binaries are there for the scale-out suites
# (Debian's postgresql package: initdb, pg_ctl, postgres under /usr/lib/postgresql/<v>/bin).
# The suites start a throwaway cluster of their own in a temp directory; the package's own
# cluster is not used. Without it those suites say plainly that they were skipped; this never
# fails the run.
set -uo pipefail

if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then exit 0; fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-postgres: no apt-get here; the PostgreSQL suites will be skipped" >&2
  exit 0
fi
as_root=""
if [ "$(id -u)" -ne 0 ]; then
  if sudo -n true 2>/dev/null; then as_root="sudo -n"; else
    echo "ensure-postgres: not root and no passwordless sudo; the PostgreSQL suites will be skipped" >&2
    exit 0
  fi
fi
echo "ensure-postgres: installing Debian's postgresql" >&2
$as_root apt-get update -qq >/dev/null 2>&1 || true
if DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -qq --no-install-recommends postgresql >/dev/null 2>&1; then
  echo "ensure-postgres: $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | head -1)" >&2
else
  echo "ensure-postgres: apt-get install postgresql failed; the PostgreSQL suites will be skipped" >&2
fi
exit 0
