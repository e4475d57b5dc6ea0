#!/usr/bin/env bash
# canvas_move x16 (16 agents, 16 connections) against an embedder's canvas owner with a
# UI thread of its own, with and without `current_list`, side by side: both servers stay
# up and the runs alternate, ROUNDS times. Usage: examples/bench/owner-ab.sh [ROUNDS] [SECONDS]
set -euo pipefail
rounds=${1:-3}
seconds=${2:-3}
cd "$(dirname "$0")/../.."
cargo build --release --example bench >/dev/null
bench=target/release/examples/bench
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
declare -A port token pid
for side in on off; do
    mkdir -m 700 "$scratch/$side"
    mkfifo "$scratch/$side.in"
    "$bench" owner-server --data "$scratch/$side" --sessions 16 --current-list "$side" \
        <"$scratch/$side.in" >"$scratch/$side.out" 2>"$scratch/$side.err" &
    pid[$side]=$!
    exec {hold}>"$scratch/$side.in"
    eval "hold_$side=$hold"
    until grep -q ready "$scratch/$side.out" 2>/dev/null; do sleep 0.1; done
    ready=$(head -n 1 "$scratch/$side.out")
    port[$side]=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["url"].split(":")[2].split("/")[0])' "$ready")
    session=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["sessions"][0]["sessionFile"])' "$ready")
    token[$side]=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$session")
done
move='{"nodeId":"note","x":10,"y":20}'
for round in $(seq "$rounds"); do
    for side in on off; do
        printf 'current_list %-3s ' "$side"
        "$bench" load --port "${port[$side]}" --token "${token[$side]}" --pid "${pid[$side]}" \
            --operation canvas_move --args "$move" --connections 16 --duration "$seconds"
    done
done
eval "exec ${hold_on}>&- ${hold_off}>&-"
wait
cat "$scratch/on.err" "$scratch/off.err"
