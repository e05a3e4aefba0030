#!/usr/bin/env bash
# Tests/Reliability/chaos.sh [TRIALS] [SEED] — the chaos run of issue #33 by hand: TRIALS seeded random trials (random
# server behaviour × -x 1/-x 4 × SIGINT/TERM/HUP/KILL at a random moment × a rerun) against the release dl, checked by
# DLChaosTests (its doc comment lists the invariants). Prints one line per trial; a failing trial prints how to replay
# it (DL_CHAOS_SEED=SEED DL_CHAOS_ONLY=INDEX). CI runs 24 trials from seed 1.
set -euo pipefail
cd "$(dirname "$0")/../../Examples/dl"
TRIALS=${1:-200}
SEED=${2:-$RANDOM}
swift build -c release --product dl
swift build --build-tests
echo "chaos: $TRIALS trials from seed $SEED"
DL_BINARY="$(swift build -c release --show-bin-path)/dl" DL_CHAOS_TRIALS=$TRIALS DL_CHAOS_SEED=$SEED \
    swift test --skip-build --filter DLChaosTests 2>&1 | grep -E '^chaos|✘|✔ Test|trial'
