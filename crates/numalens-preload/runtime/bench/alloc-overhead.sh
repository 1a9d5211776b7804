#!/bin/sh
# SPDX-License-Identifier: MIT OR Apache-2.0
# Measures the runtime's overhead on small allocations: 10 M malloc/free pairs over 2 threads,
# native vs. LD_PRELOAD=libnumalens.so with tracing on. Best of REPEAT runs each.
#
# Usage: alloc-overhead.sh [path/to/libnumalens.so]   (default: the newest one under target/)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
so=${1:-$(ls -t "$root"/target/*/build/numalens-preload-*/out/libnumalens.so 2>/dev/null | head -n 1)}
[ -f "$so" ] || { echo "no libnumalens.so: run cargo build -p numalens-preload first" >&2; exit 2; }
pairs=${PAIRS:-10000000}
threads=${THREADS:-2}
repeat=${REPEAT:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -pthread -o "$work/alloc_bench" "$here/alloc_bench.c"

# Runs interleaved (native, inert, traced) so that load from other processes hits all three alike;
# keeps the best time of each.
mkdir "$work/logs"
native="" inert="" traced=""
min() { echo "$1 ${2:-$1}" | awk '{print ($1 < $2) ? $1 : $2}'; }
i=0
while [ $i -lt "$repeat" ]; do
    native=$(min "$("$work/alloc_bench" "$pairs" "$threads")" "$native")
    inert=$(min "$(env LD_PRELOAD="$so" "$work/alloc_bench" "$pairs" "$threads")" "$inert")
    rm -f "$work"/logs/*
    traced=$(min "$(env LD_PRELOAD="$so" NUMALENS_DIR="$work/logs" "$work/alloc_bench" "$pairs" "$threads")" "$traced")
    i=$((i + 1))
done
echo "pairs=$pairs threads=$threads best of $repeat"
echo "native   ${native}s"
echo "inert    ${inert}s   ratio $(echo "$inert $native" | awk '{printf "%.3f", $1 / $2}')"
echo "traced   ${traced}s   ratio $(echo "$traced $native" | awk '{printf "%.3f", $1 / $2}')"
