#!/usr/bin/env bash
# The activity trail's cost: two serves side by side (one with --no-activity), both pinned to
# CPU 0, the load generator (`bench load`) pinned to CPU 1, session_info x16 and canvas_list
# x64 alternating between them, REPEAT (default 5) repeats of DURATION (default 5) seconds,
# then the medians and their ratio.
# Build first: cargo build --release --bins --examples
set -euo pipefail
T=${CARGO_TARGET_DIR:-target}/release
B=$T
BENCH=$T/examples/bench
W=$(mktemp -d)
rm -rf $W/with $W/without; mkdir -p $W/with/p $W/without/p
start() { # dir extra...
  local dir=$1; shift
  taskset -c 0 $B/termsprawl-tools serve --data $dir/data --project $dir/p --agent me --terminals pty "$@" > $dir/ready 2> $dir/err &
  echo $! > $dir/pid
}
start $W/with
start $W/without --no-activity
sleep 1.5
for side in with without; do
  d=$W/$side
  port=$(python3 -c "import json;print(json.load(open('$d/ready'))['url'].split(':')[2].split('/')[0])")
  tok=$(python3 -c "import json;print(json.load(open('$d/data/agent-tools/sessions/me.json'))['token'])")
  echo "$port $tok $(cat $d/pid)" > $d/conn
done
echo "load average before: $(cat /proc/loadavg)"
for rep in $(seq 1 "${REPEAT:-5}"); do
  for wl in "session_info 16" "canvas_list 64"; do
    set -- $wl
    order="with without"; [ $((rep % 2)) -eq 0 ] && order="without with"
    for side in $order; do
      read port tok pid < $W/$side/conn
      line=$(taskset -c 1 $BENCH load --port $port --token $tok --pid $pid --operation $1 --connections $2 --duration ${DURATION:-5})
      echo "rep $rep $side: $line" | tee -a $W/results
    done
  done
done
echo "load average after: $(cat /proc/loadavg)"
python3 - "$W/results" <<'PY'
import re, statistics, sys
rates = {}
for line in open(sys.argv[1]):
    m = re.match(r"rep \d+ (\w+): (\w+) x(\d+): (\d+) req/s.*server CPU ([\d.]+)", line)
    if m:
        side, op, conns, rate, cpu = m.groups()
        rates.setdefault((op, conns), {}).setdefault(side, []).append((int(rate), float(cpu)))
print("| workload | no trail req/s | trail req/s | ratio | CPU µs/req no trail / trail |")
print("| --- | --- | --- | --- | --- |")
for (op, conns), sides in rates.items():
    w = statistics.median(r for r, _ in sides["with"]); wo = statistics.median(r for r, _ in sides["without"])
    wc = statistics.median(c for _, c in sides["with"]); woc = statistics.median(c for _, c in sides["without"])
    print(f"| {op} ×{conns} | {wo:.0f} | {w:.0f} | {w / wo:.3f}× | {woc:.1f} / {wc:.1f} |")
PY
echo "trail lines written (with): $(wc -l < $W/with/data/agent-tools/activity/*.jsonl), dropped: $(grep -c dropped $W/with/err || true)"
ls $W/without/data/agent-tools/ | tr '\n' ' '; echo
kill $(cat $W/with/pid) $(cat $W/without/pid)
