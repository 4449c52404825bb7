#!/usr/bin/env bash
# scripts/run-long-tests.sh [K/N]: the long tier (`make test-long [SHARD=K/N]`): every test named
# `long_...`, which `make test` leaves out (each is `#[ignore = "long tier ..."]`, and `make test`
# runs a shorter form of it). With K/N, only shard K of N (nextest's `--partition count:K/N`:
# the long tests in nextest's order, dealt out in turn, so a test stays in its shard until long
# tests are added or removed). .ci/run runs one shard after `make test`, picked from the commit
# count, so every long test runs at least once every N landings.
#
# A shard that holds the REPL drive installs evcxr_repl first (scripts/setup/setup.sh --repl: a
# one-time build of 10+ minutes); the others do not need it. Needs cargo-nextest (its
# partitions); each test's time goes to target/nextest/long/junit.xml.
set -uo pipefail
cd "$(dirname "$0")/.."
shard=${1:-}
filter='test(/(^|::)long_/)'
partition=()
if [ -n "$shard" ]; then
  [[ "$shard" =~ ^[1-9][0-9]*/[1-9][0-9]*$ ]] && [ "${shard%/*}" -le "${shard#*/}" ] ||
    { echo "run-long-tests: SHARD must be K/N with 1 <= K <= N (got '$shard')" >&2; exit 2; }
  partition=(--partition "count:$shard")
fi
cargo nextest --version >/dev/null 2>&1 ||
  { echo "run-long-tests: the long tier needs cargo-nextest (cargo install cargo-nextest)" >&2; exit 2; }

list=$(cargo nextest list --profile long --run-ignored only -E "$filter" "${partition[@]}" --message-format oneline 2>/dev/null) ||
  { cargo nextest list --profile long --run-ignored only -E "$filter" "${partition[@]}" --message-format oneline; exit 1; }
count=$(grep -c . <<<"$list")
echo "run-long-tests: ${shard:+shard $shard: }$count long test(s):"
sed 's/^/  /' <<<"$list"
[ "$count" -gt 0 ] || { echo "run-long-tests: no long test in this shard" >&2; exit 1; }
if grep -q 'repl::long_' <<<"$list"; then
  scripts/dev/phase.sh "setup (evcxr_repl)" bash scripts/setup/setup.sh --repl || exit 1
fi
status=0
scripts/dev/phase.sh "long tier${shard:+ $shard}" env OMP_WAIT_POLICY=PASSIVE \
  cargo nextest run --profile long --no-fail-fast --run-ignored only -E "$filter" "${partition[@]}" || status=1
python3 scripts/dev/test_timings.py --junit target/nextest/long/junit.xml --phases /dev/null --python /dev/null || true
exit $status
