#!/usr/bin/env python3
"""Round trip of one key through a PTY, with and without the pane filter.

Runs `sh -c 'stty raw -echo; exec cat'` on a PTY directly, then behind
`termsprawl-tools pane --` (two PTYs and the relay in between), writes one byte
2,000 times and times each until it comes back. Prints the median and p99 in µs.

    cargo build --release && python3 examples/bench/pane_rtt.py [path/to/termsprawl-tools]
"""
import os
import pty
import select
import statistics
import sys
import time

SAMPLES = 2000


def measure(argv):
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(argv[0], argv)
    time.sleep(0.5)  # let stty run
    samples = []
    for _ in range(SAMPLES):
        start = time.perf_counter()
        os.write(fd, b"x")
        got = b""
        while b"x" not in got:
            select.select([fd], [], [], 5)
            got += os.read(fd, 100)
        samples.append((time.perf_counter() - start) * 1e6)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    samples.sort()
    return statistics.median(samples), samples[int(SAMPLES * 0.99)]


def main():
    exe = sys.argv[1] if len(sys.argv) > 1 else "target/release/termsprawl-tools"
    program = ["sh", "-c", "stty raw -echo; exec cat"]
    for name, argv in [("direct", program), ("filter", [exe, "pane", "--"] + program)] * 2:
        median, p99 = measure(argv)
        print(f"{name}: round trip median {median:.0f} us, p99 {p99:.0f} us")


if __name__ == "__main__":
    main()
