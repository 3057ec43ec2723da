"""A fixed delay on every packet of an NFQUEUE queue: what `tc qdisc ... netem delay` does, for
kernels built without sch_netem (this machine's: `tc ... netem` answers "Specified qdisc kind is
unknown"). Used by benchmarks/test_faults_round2.py, run inside a test host's network namespace:

    ip netns exec fleet-tf-3 iptables -A OUTPUT -o eth0 -j NFQUEUE --queue-num 7 --queue-bypass
    ip netns exec fleet-tf-3 python benchmarks/nfqueue_delay.py --queue 7 --delay-ms 300

Each packet is held and accepted `--delay-ms` after it arrived, in arrival order (a constant delay
keeps the order, as netem's does without jitter). `--queue-bypass` lets packets through while no
program is bound to the queue. Needs `pip install netfilterqueue` (and libnetfilter-queue).
Prints "ready" on stdout once bound; ends on SIGTERM.
"""

from __future__ import annotations

import argparse
import collections
import select
import signal
import sys
import time

from netfilterqueue import NetfilterQueue  # type: ignore[import-not-found]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queue", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, required=True)
    args = parser.parse_args()
    delay = args.delay_ms / 1000.0
    held: collections.deque = collections.deque()
    stop = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)

    def hold(packet) -> None:  # type: ignore[no-untyped-def]
        packet.retain()
        held.append((time.monotonic() + delay, packet))

    queue = NetfilterQueue()
    queue.bind(args.queue, hold, max_len=65536)
    fd = queue.get_fd()
    print("ready", flush=True)
    try:
        while not stop:
            now = time.monotonic()
            while held and held[0][0] <= now:
                held.popleft()[1].accept()
            timeout = max(0.0, held[0][0] - now) if held else 0.5
            try:
                readable, _, _ = select.select([fd], [], [], timeout)
            except InterruptedError:
                continue
            if readable:
                queue.run(block=False)
    finally:
        for _, packet in held:  # let what is held through rather than drop it
            try:
                packet.accept()
            except Exception:
                pass
        queue.unbind()
    return 0


if __name__ == "__main__":
    sys.exit(main())
