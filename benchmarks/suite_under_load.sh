#!/usr/bin/env bash
# The README's second command (.ci/run, as CI runs it: a clean clone, CI=true) RUNS times in a row
# beside a CPU hog that keeps the load average at LOAD_FACTOR x the cores (issue 25: "three
# consecutive green runs under a CPU hog, with times"). The hog is LOAD_FACTOR x nproc busy loops
# at nice HOG_NICE: each is always runnable, so the load average sits at LOAD_FACTOR x the cores,
# and the suite's processes (nice 0) are preempted by them for a share of every core.
#
#   benchmarks/suite_under_load.sh [OUT.md]     # RUNS=3 LOAD_FACTOR=4 HOG_NICE=10 by default
#
# Needs what the README's second command needs (root for the test hosts). It repoints the
# editable install to its clone, as .ci/run does; `pip install --no-deps -e .` points it back.
set -uo pipefail
runs=${RUNS:-3}
factor=${LOAD_FACTOR:-4}
hog_nice=${HOG_NICE:-10}
repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
out=${1:-$repo/benchmarks/results/suite-under-load.md}
work=$(mktemp -d /tmp/fleet-under-load.XXXXXX)
git clone -q "$repo" "$work/main"
[ -d "$repo/../shared" ] && cp -r "$repo/../shared" "$work/shared"
commit=$(git -C "$work/main" rev-parse --short HEAD)

hogs=()
for _ in $(seq $((factor * $(nproc)))); do
    nice -n "$hog_nice" sh -c 'while :; do :; done' &
    hogs+=($!)
done
stop() { kill "${hogs[@]}" "${sampler:-}" 2>/dev/null; }
trap stop EXIT
# The load average, every 30 s, to show the hog held it.
(while :; do cut -d' ' -f1 /proc/loadavg >>"$work/load"; sleep 30; done) &
sampler=$!

{
    echo "# The README's second command under a CPU hog"
    echo
    echo "Commit $commit, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ); hog: $((factor * $(nproc))) busy loops at nice $hog_nice."
    echo "Command: \`benchmarks/suite_under_load.sh\` (RUNS=$runs LOAD_FACTOR=$factor HOG_NICE=$hog_nice)."
    echo
    echo "| run | exit | wall | pytest's last line | load average (min / median / max) |"
    echo "|---|---|---|---|---|"
} >"$work/table"
failed=0
for i in $(seq "$runs"); do
    : >"$work/load"
    began=$(date +%s)
    (cd "$work/main" && CI=true bash .ci/run) >"$work/run$i.log" 2>&1
    rc=$?
    wall=$(($(date +%s) - began))
    last=$(grep -E '^=+ .*(passed|failed|error).* =+$' "$work/run$i.log" | tail -1 | sed 's/=//g; s/^ *//; s/ *$//')
    load=$(sort -n "$work/load" | awk '{a[NR]=$1} END {if (NR) printf "%s / %s / %s", a[1], a[int((NR+1)/2)], a[NR]}')
    echo "| $i | $rc | $((wall / 60)) min $((wall % 60)) s | ${last:-none (see $work/run$i.log)} | $load |" >>"$work/table"
    [ "$rc" = 0 ] || failed=1
done
cp "$work/table" "$out"
cat "$out"
echo "logs: $work/run*.log"
exit $failed
