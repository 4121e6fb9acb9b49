"""A router on Python's grpcio (gRPC C-core), for tests/grpcio_router_test.go.

Usage: grpcio_router.py HOST:PORT [gzip|deflate]

It opens one Monitor stream with grpcio's defaults (no generated stubs, no
protobuf package: frames are raw bytes both ways) and is driven on stdin,
one command a line:

    SEND <hex>    send one RouterFrame, encoded by the test
    CLOSE         half-close the stream (no more frames; stdin EOF does too)

and writes on stdout, one line each, flushed:

    FRAME <hex>               one WorkerFrame received
    END <STATUS> <details>    the stream ended with this gRPC status
"""

import queue
import sys
import threading

import grpc

METHOD = "/sglang.router.loadmonitor.v1.LoadMonitorService/Monitor"


def out(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def commands(q):
    for line in sys.stdin:
        verb, _, arg = line.strip().partition(" ")
        if verb == "SEND":
            q.put(bytes.fromhex(arg))
        elif verb == "CLOSE":
            break
        elif verb:
            sys.stderr.write("grpcio_router.py: unknown command %r\n" % line)
    q.put(None)


def frames(q):
    while True:
        frame = q.get()
        if frame is None:
            return  # grpcio half-closes the stream
        yield frame


def main():
    target = sys.argv[1]
    compression = {"gzip": grpc.Compression.Gzip, "deflate": grpc.Compression.Deflate}.get(
        sys.argv[2] if len(sys.argv) > 2 else "")
    q = queue.Queue()
    threading.Thread(target=commands, args=(q,), daemon=True).start()
    with grpc.insecure_channel(target, compression=compression) as channel:
        # None serializers: grpcio sends and returns the bytes as they are.
        monitor = channel.stream_stream(METHOD, request_serializer=None, response_deserializer=None)
        responses = monitor(frames(q))
        try:
            for frame in responses:
                out("FRAME " + frame.hex())
            out("END %s %s" % (responses.code().name, responses.details() or ""))
        except grpc.RpcError as e:
            out("END %s %s" % (e.code().name, e.details() or ""))


if __name__ == "__main__":
    main()
