#!/usr/bin/env bash
# What calls that wait cost the others: session_info x16 and canvas_list x64 against one
# `serve --terminals pty`, first with no call waiting, then with 50 waiting (10 terminals
# running `sleep`, 5 `terminal_wait` calls on each), then with none again, ROUNDS times.
# Usage: examples/bench/waits-ab.sh [ROUNDS] [SECONDS]
set -euo pipefail
rounds=${1:-3}
seconds=${2:-3}
cd "$(dirname "$0")/../.."
cargo build --release --bin termsprawl-tools --bin termsprawlctl --example bench >/dev/null 2>&1
bench=target/release/examples/bench
ctl=target/release/termsprawlctl
scratch=$(mktemp -d)
trap 'kill "$serve" 2>/dev/null; wait 2>/dev/null; rm -rf "$scratch"' EXIT
mkdir -m 700 "$scratch/data" "$scratch/project" "$scratch/home"
HOME="$scratch/home" SHELL=/bin/bash target/release/termsprawl-tools serve --data "$scratch/data" \
    --project "$scratch/project" --terminals pty --no-view --agent me >"$scratch/out" 2>"$scratch/err" </dev/null &
serve=$!
until grep -q ready "$scratch/out" 2>/dev/null; do sleep 0.1; done
ready=$(head -n 1 "$scratch/out")
port=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["url"].split(":")[2].split("/")[0])' "$ready")
session=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["sessions"][0]["sessionFile"])' "$ready")
token=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$session")
call() { "$ctl" --session "$session" call "$@"; }
value() { python3 -c 'import json,sys; print(json.load(sys.stdin)["value"][sys.argv[1]])' "$1"; }
terms=()
for i in $(seq 10); do terms+=("$(call terminal_open '{}' | value nodeId)"); done
load() {
    for workload in "session_info 16" "canvas_list 64"; do
        set -- $workload
        printf '%-5s ' "$label"
        "$bench" load --port "$port" --token "$token" --pid "$serve" --operation "$1" \
            --connections "$2" --duration "$seconds"
    done
}
for round in $(seq "$rounds"); do
    label=none load
    for t in "${terms[@]}"; do
        call terminal_submit "{\"nodeId\":\"$t\",\"command\":\"sleep 3600\"}" >/dev/null
    done
    sleep 1
    for t in "${terms[@]}"; do
        for k in 1 2 3 4 5; do
            call terminal_wait "{\"nodeId\":\"$t\",\"until\":\"exit\",\"timeoutMs\":600000}" >/dev/null &
        done
    done
    sleep 2
    label=50 load
    for t in "${terms[@]}"; do call terminal_interrupt "{\"nodeId\":\"$t\"}" >/dev/null; done
    wait $(jobs -p | grep -v "^$serve\$") 2>/dev/null || true
done
