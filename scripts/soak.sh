#!/usr/bin/env bash
# The longer, randomized runs of the property tests, each with a fresh seed
# (printed, so a failure can be replayed with PROPTEST_RNG_SEED=that seed):
# the failpoint property test at MEMFS_SOAK_FAILPOINT_CASES (1000), the
# model, fuzz and secrets tests at MEMFS_SOAK_SCALE (4) times their CI size;
# and the journal's soaks: kill -9 at random instants (MEMFS_KILL_TRIALS,
# 30), a running owner under retention (MEMFS_SOAK_EDITS, 20000 edits), and
# power cut at a random step of the in-memory disk (MEMFS_SOAK_POWER_CASES,
# 100,000 cases of one agent, a tenth as many of two agents and a person
# at once; CI's run through scripts/test.sh takes 10,000).
#
#   scripts/soak.sh               run them
#   scripts/soak.sh --if-changed  run them only when the store, the
#                                 persister, the journal or the history
#                                 changed since the commit in .ci/soaked
#                                 (scripts/test.sh does this, so such a
#                                 change never lands without a fresh seed)
#   scripts/soak.sh --record      run them, then write HEAD to .ci/soaked
#
# A proptest failure is kept in tests/*.proptest-regressions: commit it, and
# turn it into a named regression test.
set -euo pipefail
cd "$(dirname "$0")/.."
watched=(crates/core/src/store crates/durable/src/persist crates/durable/src/journal)
mode="${1:-}"
if [ "$mode" = "--if-changed" ]; then
  soaked="$(cat .ci/soaked 2>/dev/null || true)"
  if [ -n "$soaked" ] && git cat-file -e "$soaked^{commit}" 2>/dev/null \
    && git diff --quiet "$soaked" HEAD -- "${watched[@]}" 2>/dev/null; then
    echo "soak: no change to ${watched[*]} since ${soaked:0:12}; the randomized runs are skipped"
    exit 0
  fi
  echo "soak: ${watched[*]} changed since ${soaked:0:12}; randomized runs follow"
fi
seed="$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')"
echo "soak: PROPTEST_RNG_SEED=$seed"
export PROPTEST_RNG_SEED="$seed"
export MEMFS_PROPTEST_SCALE="${MEMFS_SOAK_SCALE:-4}"
MEMFS_FAILPOINT_CASES="${MEMFS_SOAK_FAILPOINT_CASES:-1000}" \
  cargo test --locked --quiet --features failpoints --test failpoints tool_and_person
cargo test --locked --quiet --test model --test fuzz --test secrets
MEMFS_KILL_TRIALS="${MEMFS_KILL_TRIALS:-30}" MEMFS_SOAK_EDITS="${MEMFS_SOAK_EDITS:-20000}" \
  cargo test --locked --quiet --test journal -- kill_9_at_random_instants retention_bounds
power="${MEMFS_SOAK_POWER_CASES:-100000}"
MEMFS_POWER_CASES="$power" MEMFS_POWER_WRITERS_CASES="$((power / 10))" MEMFS_POWER_SEEDS="$((power / 1000 + 3))" \
  cargo test --locked --quiet --test power_loss
echo "soak: passed with PROPTEST_RNG_SEED=$seed"
if [ "$mode" = "--record" ]; then
  git rev-parse HEAD > .ci/soaked
  echo "soak: recorded $(cat .ci/soaked) in .ci/soaked (commit it)"
fi
