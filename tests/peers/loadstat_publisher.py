"""SGLang's own LoadStat publisher, driven by tests/peer_loadstat_test.go.

Run with a venv made from tests/peers/sglang-<version>.txt:

    loadstat_publisher.py BASE_PORT DP_SIZE

It imports SGLang's publisher module from the installed wheel
(sglang.srt.managers.scheduler_components.load_publisher, SGLang 0.5.19 and
later) and makes one SchedulerLoadPublisher per DP rank, as every scheduler
process owns one, each bound on tcp://127.0.0.1:BASE_PORT+rank by the
module's own _open_pub_socket. It prints

    ready <sglang version> <fields of LoadStat, comma-separated>

then reads stdin, one JSON object a line: {"rank": r, <LoadSnapshot fields>},
and from then on publishes that rank's LoadSnapshot through
publish_load_stat every 20 ms (force=True, so the call throttle does not
hold it back; the publisher's own dedup still re-sends an unchanged stat
only once a second, as in the engine). Each line is answered "ok". It exits
when stdin closes.

Two things the engine's scheduler does are bypassed, because they need the
engine's runtime (torch, the parallel state) which the wheel is installed
without:
  - the package __init__ modules of sglang, sglang.srt and sglang.srt.utils
    (they import torch and the engine): bare package modules stand in for
    them, so only the publisher's own imports run;
  - the rank gating and port resolution in SchedulerLoadPublisher.__init__
    (is_kv_publisher_rank reads the parallel state): the gate is answered
    "not a publisher rank", which leaves the real constructor's bookkeeping
    in place with no socket, and the socket is then bound on the port the
    test gives, as the resolver would on base + rank.
Everything that shapes the wire (LoadStat, its encoder, the frames, the
sequence, the dedup) is SGLang's.
"""

import importlib.metadata
import json
import os
import sys
import threading
import types


def import_publisher():
    site = next(p for p in sys.path if os.path.isdir(os.path.join(p, "sglang", "srt")))
    for name in ("sglang", "sglang.srt", "sglang.srt.utils"):
        mod = types.ModuleType(name)
        mod.__path__ = [os.path.join(site, *name.split("."))]
        sys.modules[name] = mod
    from sglang.srt.managers import load_snapshot
    from sglang.srt.managers.scheduler_components import load_publisher

    return load_publisher, load_snapshot


def main():
    base, dp_size = int(sys.argv[1]), int(sys.argv[2])
    lp, ls = import_publisher()
    lp.is_kv_publisher_rank = lambda *args, **kwargs: False
    publishers = []
    for rank in range(dp_size):
        try:  # 0.5.20 and later
            p = lp.SchedulerLoadPublisher(kv_events_config=None, publish_interval=1)
        except TypeError:  # 0.5.19 also takes the parallel state
            p = lp.SchedulerLoadPublisher(kv_events_config=None, ps=None, publish_interval=1)
        p._rank = rank
        p._socket = lp._open_pub_socket("tcp://127.0.0.1:%d" % (base + rank))
        publishers.append(p)

    snapshots = [None] * dp_size
    lock = threading.Lock()
    done = threading.Event()

    def publish():
        while not done.wait(0.02):
            with lock:
                current = list(snapshots)
            for p, snap in zip(publishers, current):
                if snap is not None:
                    p.publish_load_stat(lambda: snap, force=True)

    t = threading.Thread(target=publish, daemon=True)
    t.start()
    print("ready %s %s" % (importlib.metadata.version("sglang"), ",".join(lp.LoadStat.__struct_fields__)), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        fields = json.loads(line)
        rank = fields.pop("rank")
        snap = ls.LoadSnapshot(dp_rank=rank, **fields)
        with lock:
            snapshots[rank] = snap
        print("ok", flush=True)
    done.set()
    t.join()
    for p in publishers:
        p.close()


if __name__ == "__main__":
    main()
