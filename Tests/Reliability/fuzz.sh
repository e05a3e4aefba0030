#!/usr/bin/env bash
# Tests/Reliability/fuzz.sh — the parser fuzz test with a million seeded random and mutated inputs.
#
#   Tests/Reliability/fuzz.sh [ITERATIONS=1000000] [SEED=24301]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export DOWNLOADER_FUZZ_ITERATIONS=${1:-1000000}
export DOWNLOADER_FUZZ_SEED=${2:-24301}
cd "$ROOT"
swift build --build-tests >&2
time swift test --skip-build --filter ParserFuzzTests
