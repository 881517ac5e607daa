#!/usr/bin/env bash
# An ssh stand-in for scripts/validate-ib.sh between the two Soft-RoCE guests (validate_ib_rxe.sh): the
# guests have no sshd, so guest b serves `busybox nc -ll -p 2222 -e bash` and this sends it the command
# line (stdin from /dev/null, stderr merged) and returns its output and exit code, as `ssh HOST CMD` does.
#   validate_ib_rsh.sh HOST COMMAND...
host=$1
shift
{ printf '{ %s; } </dev/null 2>&1\n' "$*"; printf 'echo "__rc=$?"\n'; } | busybox nc "$host" 2222 | {
  rc=255   # no exit code came back: the connection failed
  while IFS= read -r l; do
    case $l in __rc=*) rc=${l#__rc=} ;; *) printf '%s\n' "$l" ;; esac
  done
  exit "$rc"
}
