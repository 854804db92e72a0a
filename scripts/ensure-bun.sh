#!/usr/bin/env bash
# Make sure `bun` runs: a machine with only Node.js and npm gets it from npm.
# Prints nothing on success when bun is already there.
set -euo pipefail

have_bun() { command -v bun >/dev/null 2>&1 && bun --version >/dev/null 2>&1; }

if have_bun; then exit 0; fi

if ! command -v npm >/dev/null 2>&1; then
  echo "ensure-bun: neither bun nor npm is installed; install Node.js (with npm) first" >&2
  exit 1
fi

echo "ensure-bun: installing bun from npm" >&2
if ! npm install -g bun >&2 2>/dev/null; then
  # No write access to the global prefix: install under ~/.local (the Makefile puts it on PATH).
  npm install -g --prefix "$HOME/.local" bun >&2
fi
export PATH="$HOME/.local/bin:$PATH"

if ! have_bun; then
  # npm may have skipped the package's install script; run it by hand.
  for root in "$(npm root -g 2>/dev/null || true)" "$HOME/.local/lib/node_modules"; do
    if [ -f "$root/bun/install.js" ]; then (cd "$root/bun" && node install.js >&2) || true; fi
  done
fi

have_bun || { echo "ensure-bun: bun is still not runnable after npm install -g bun" >&2; exit 1; }
echo "ensure-bun: $(command -v bun) $(bun --version)" >&2
