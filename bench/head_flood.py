#!/usr/bin/env python3
"""Memory a flood of half-sent request heads makes a server hold.

Opens COUNT connections to ADDR; each sends a request line, a Host header
and one header value of BYTES bytes that never ends (no CRLF), in 4 KiB
writes, then stays open. Prints the server's resident memory (from
/proc/PID/status) before and with all of them open, per connection, and
how many connections the server had closed by then (a server that refuses
a head past its limit closes it: those hold nothing).

  bench/head_flood.py --addr 127.0.0.1:8000 --pid 1234 --count 200 --bytes 262144
"""
import argparse
import json
import socket
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--addr", required=True)
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--bytes", type=int, default=256 * 1024)
    args = parser.parse_args()
    host, port = args.addr.rsplit(":", 1)
    before = rss_kib(args.pid)
    sockets = []
    closed = set()
    head = b"GET / HTTP/1.1\r\nhost: localhost\r\nx-flood: "
    for _ in range(args.count):
        s = socket.create_connection((host, int(port)))
        s.setblocking(True)
        s.settimeout(5)
        sockets.append(s)
        try:
            s.sendall(head)
            sent = 0
            while sent < args.bytes:
                n = min(4096, args.bytes - sent)
                s.sendall(b"a" * n)
                sent += n
        except OSError:
            closed.add(len(sockets) - 1)
    # Let the server read what was sent (bounded: two seconds).
    deadline = time.time() + 2
    peak = rss_kib(args.pid)
    while time.time() < deadline:
        peak = max(peak, rss_kib(args.pid))
        time.sleep(0.1)
    for i, s in enumerate(sockets):
        s.setblocking(False)
        try:
            s.recv(1, socket.MSG_PEEK)
            closed.add(i)
        except BlockingIOError:
            pass
        except OSError:
            closed.add(i)
    print(json.dumps({
        "connections": args.count,
        "bytes_each": args.bytes,
        "rss_before_kib": before,
        "rss_peak_kib": peak,
        "kib_per_connection": round((peak - before) / args.count, 1),
        "answered_or_closed": len(closed),
    }))
    for s in sockets:
        s.close()


if __name__ == "__main__":
    main()
