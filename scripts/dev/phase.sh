#!/usr/bin/env bash
# scripts/dev/phase.sh NAME COMMAND...: runs COMMAND and appends "NAME<TAB>SECONDS<TAB>EXIT" to
# target/test-phases.tsv (or $TRAINBOOK_PHASES), so that `make test` ends with what each of its
# phases took (scripts/dev/test_timings.py prints them). Exits with COMMAND's status.
set -uo pipefail
name=${1:?usage: $0 NAME COMMAND...}
shift
file=${TRAINBOOK_PHASES:-target/test-phases.tsv}
mkdir -p "$(dirname "$file")"
SECONDS=0
"$@"
status=$?
printf '%s\t%d\t%d\n' "$name" "$SECONDS" "$status" >>"$file"
exit $status
