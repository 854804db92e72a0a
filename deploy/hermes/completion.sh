#!/bin/sh
# completion.sh: a Hermes webhook route's completion_script that tells hookspool how the agent
# run a delivery started has ended, through the CLI's outcome verb.
#
# The gateway answers a delivery with 202 before the agent runs, so that answer says only that
# the request was accepted. A route's completion_script runs once the run has ended, with a
# JSON envelope on stdin that names the run's terminal status and the request's delivery id;
# the gateway takes that id from the request's headers (X-GitHub-Delivery, then svix-id, then
# webhook-id, then X-Request-ID), and hookspool's id is its webhook-id header (hs_...).
#
# Install: copy this file into the profile's ~/.hermes/scripts/ (the gateway runs only scripts
# from there, .sh files with bash, with a timeout, and keeps their output out of its answer),
# and name it on the route:
#
#   platforms:
#     webhook:
#       extra:
#         routes:
#           my-route:
#             completion_script: completion.sh
#
# Environment: HOOKSPOOL_BIN, the hookspool binary (default: hookspool on PATH); HOOKSPOOL_HOME,
# the state directory the dispatcher uses, read by the CLI itself. The gateway's own environment
# reaches the script (less its model and chat credentials), but HOME may be a per-profile one,
# so set HOOKSPOOL_HOME in the gateway's environment rather than rely on a default under ~.
#
# What it does:
#   success                 -> hookspool outcome <id> ok
#   failure (failed, error) -> hookspool outcome <id> failed --reason "hermes agent run ended: <status>"
#   cancelled               -> nothing: the gateway cancelled the run on purpose
#   anything else           -> nothing, and a note on stderr
# A delivery id that does not start with hs_ is not hookspool's (the route has other senders,
# or a header earlier in the gateway's order, such as a dedup_header named X-GitHub-Delivery,
# was taken instead): nothing. Nothing is a normal result and exits 0; so does an envelope that
# is not JSON. The reason is a fixed phrase and the status word, never the agent's output or
# the payload, which may carry what a log line must not.
#
# The envelope is read with jq, or python3 when jq is missing. Only the envelope's own keys are
# read, never a search through the payload it may carry, where a "status" or an hs_ id could
# stand for something else. The gateway's envelope is not settled upstream yet and its key
# names are not published, so the script tries a few: the status at status or outcome (or
# run.status, result.status), the id at delivery_id (or delivery.id, request.delivery_id); when
# the envelope has no id at all, HERMES_WEBHOOK_DELIVERY_ID, which the gateway's script runner
# may export. Check them against the envelope of the gateway version you run.
set -eu

note() {
  printf 'hookspool completion: %s\n' "$1" >&2
}

# Prints "<status> <id>": the status lower-cased when it is a plain word, else "-"; the id when
# it is a hookspool id, "?" when the envelope has some other id, "-" when it has none. Exits 69
# when there is nothing to read it with, another non-zero code when stdin is not one JSON value.
read_envelope() {
  if command -v jq >/dev/null 2>&1; then
    jq -srj 2>/dev/null '
      def obj: if type == "object" then . else {} end;
      def first_string: map(select(type == "string")) | .[0];
      if length == 1 then .[0] else error("not one JSON value") end
      | obj as $e
      | ([$e.status, $e.outcome, ($e.run | obj).status, ($e.result | obj).status] | first_string) as $s
      | ([$e.delivery_id, ($e.delivery | obj).id, ($e.request | obj).delivery_id] | first_string) as $i
      | (if $s != null and ($s | test("\\A[A-Za-z_-]{1,32}\\z")) then $s | ascii_downcase else "-" end)
        + " "
        + (if $i == null then "-" elif ($i | test("\\Ahs_[A-Za-z0-9_]{1,200}\\z")) then $i else "?" end)
    '
  elif command -v python3 >/dev/null 2>&1; then
    python3 -c '
import json, re, sys
try:
    e = json.load(sys.stdin)
except ValueError:
    sys.exit(65)
def obj(v):
    return v if isinstance(v, dict) else {}
e = obj(e)
def first_string(values):
    return next((v for v in values if isinstance(v, str)), None)
s = first_string([e.get("status"), e.get("outcome"), obj(e.get("run")).get("status"), obj(e.get("result")).get("status")])
i = first_string([e.get("delivery_id"), obj(e.get("delivery")).get("id"), obj(e.get("request")).get("delivery_id")])
s = s.lower() if s is not None and re.fullmatch(r"[A-Za-z_-]{1,32}", s) else "-"
i = "-" if i is None else i if re.fullmatch(r"hs_[A-Za-z0-9_]{1,200}", i) else "?"
sys.stdout.write(s + " " + i)
'
  else
    return 69
  fi
}

rc=0
fields=$(read_envelope) || rc=$?
case $rc in
  0) ;;
  69)
    note "neither jq nor python3 is on PATH; outcome not reported"
    exit 0
    ;;
  *)
    note "the envelope on stdin is not one JSON value; outcome not reported"
    exit 0
    ;;
esac
status=${fields%% *}
id=${fields#* }

if [ "$id" = "-" ]; then
  case ${HERMES_WEBHOOK_DELIVERY_ID:-} in
    hs_*) id=$HERMES_WEBHOOK_DELIVERY_ID ;;
  esac
fi
case $id in
  hs_*) ;;
  *) exit 0 ;; # not a delivery from hookspool
esac
case $id in
  *[!A-Za-z0-9_]*) exit 0 ;;
esac

case $status in
  success | succeeded)
    exec "${HOOKSPOOL_BIN:-hookspool}" outcome "$id" ok
    ;;
  failure | failed | error)
    exec "${HOOKSPOOL_BIN:-hookspool}" outcome "$id" failed --reason "hermes agent run ended: $status"
    ;;
  cancelled | canceled)
    exit 0
    ;;
  *)
    note "status \"$status\" is not one this script knows; outcome not reported"
    exit 0
    ;;
esac
