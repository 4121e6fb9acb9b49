"""A stand-in for SGLang's per-rank load publishers, on libzmq.

Run with the venv tests/peers/setup.sh makes (.venv-peers/clients: pinned
pyzmq and msgpack):

    publisher.py BASE_PORT DP_SIZE GENERATION FIRST_SEQ

Binds one PUB socket per rank on tcp://127.0.0.1:BASE_PORT+rank, prints
"ready" once all are bound, then every 10 ms sends each rank one message
framed as SGLang's ZmqEventPublisher frames it: [b"load", sequence as 8
bytes big-endian, msgpack LoadStat array with its tag first]. The array is
a newer engine's (appended fields after attn_dp_rank); its values are
derived from GENERATION and the rank so a test can tell a restarted
publisher's messages from the old one's:

    ["LoadStat", num_running_reqs = 10*GENERATION + rank,
     num_waiting_reqs = GENERATION, num_tokens = 1000*GENERATION + rank,
     max_total_num_tokens = 200000, attn_dp_rank = rank,
     num_waiting_uncached_tokens = 64, num_total_tokens = 2000*GENERATION,
     max_running_requests = 256, 987654, 12.5]

Exits when stdin is closed.
"""

import sys
import threading

import msgpack
import zmq


def main():
    base, dp_size, gen, seq = (int(a) for a in sys.argv[1:5])
    ctx = zmq.Context()
    socks = []
    for rank in range(dp_size):
        sock = ctx.socket(zmq.PUB)
        sock.setsockopt(zmq.LINGER, 0)
        sock.bind(f"tcp://127.0.0.1:{base + rank}")
        socks.append(sock)

    done = threading.Event()

    def wait_stdin():
        sys.stdin.read()
        done.set()

    threading.Thread(target=wait_stdin, daemon=True).start()
    print("ready", flush=True)
    while not done.is_set():
        for rank, sock in enumerate(socks):
            body = msgpack.packb(
                ["LoadStat", 10 * gen + rank, gen, 1000 * gen + rank, 200000, rank,
                 64, 2000 * gen, 256, 987654, 12.5]
            )
            sock.send_multipart([b"load", seq.to_bytes(8, "big"), body])
        seq += 1
        done.wait(0.01)
    for sock in socks:
        sock.close()
    ctx.term()


if __name__ == "__main__":
    main()
