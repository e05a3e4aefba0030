#!/usr/bin/env bash
# Examples/dl/build-release.sh [SWIFT BUILD OPTIONS…] — builds the release `dl` as it is shipped and prints its path.
#
# On Linux the binary is linked with `--static-swift-stdlib`: Swift's runtime, Foundation and FoundationNetworking
# are inside it (glibc, libcurl and the libraries libcurl uses come from the system), so it runs on a machine without
# a Swift toolchain, starts about 9 ms sooner and spent 0.025–0.065 ms less CPU a small file of a 20,000-file list
# than the same code linked against the toolchain's shared libraries (not measurable at 100,000; BENCHMARKS.md, #52). It is built in its own folder,
# `.build-static`, beside `swift build`'s `.build`. FoundationNetworking asks the linker for libcurl by name
# (`-lcurl`): where libcurl's development package is not installed, a link to the runtime library in that folder
# stands in. On macOS, where the Swift runtime is part of the system, this is `swift build -c release`.
set -euo pipefail
cd "$(dirname "$0")"
if [[ "$(uname -s)" != Linux ]]; then
    swift build -c release --product dl "$@" >&2
    echo "$(swift build -c release --show-bin-path)/dl"
    exit 0
fi
scratch="$PWD/.build-static"
link=()
if ! ldconfig -p | grep -q 'libcurl\.so '; then
    runtime=$(ldconfig -p | awk '/libcurl\.so\.4 / {print $NF; exit}')
    [[ -n "$runtime" ]] || { echo "build-release.sh: libcurl (libcurl4) is not installed" >&2; exit 1; }
    mkdir -p "$scratch/curl-link"
    ln -sf "$runtime" "$scratch/curl-link/libcurl.so"
    link=(-Xlinker -L"$scratch/curl-link")
fi
swift build -c release --product dl --static-swift-stdlib --scratch-path "$scratch" "${link[@]}" "$@" >&2
echo "$scratch/release/dl"
