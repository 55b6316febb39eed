"""The official Python SDK's side of the side-by-side benchmark.

python bench/python/bench.py <workload.json>
Prints one JSON object: {"sse_encode": {"events", "bytes", "seconds"}}.

The events are parsed into the SDK's pydantic models before timing, as a
producer holds them; the timed loop is `EventEncoder().encode(event)`, the
SDK's whole producer path.
"""

import json
import sys
import time

from pydantic import TypeAdapter

from ag_ui.core import Event
from ag_ui.encoder import EventEncoder


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        raw = json.load(f)
    adapter = TypeAdapter(Event)
    events = [adapter.validate_python(e) for e in raw]
    encoder = EventEncoder()

    def run() -> int:
        total = 0
        for e in events:
            total += len(encoder.encode(e).encode("utf-8"))
        return total

    run()  # warm-up, as for the other implementations
    start = time.perf_counter()
    total = run()
    seconds = time.perf_counter() - start
    print(json.dumps({"sse_encode": {"events": len(events), "bytes": total, "seconds": seconds}}))


if __name__ == "__main__":
    main()
