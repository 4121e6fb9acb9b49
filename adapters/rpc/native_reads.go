package rpc

import "net"

// PooledReads returns ln, its connections made to read as grpc-go reads
// a *net.TCPConn: into a buffer from grpc-go's pool taken only once bytes
// have arrived, and given back once they are read, instead of a 32 KiB
// bufio.Reader each connection holds for its life (grpc-go's
// internal/transport bufferedReader). An idle router's connection then
// holds no read buffer.
//
// It does so for connections that replay bytes read before they were
// handed over and say when reads go straight to the connection accepted
// (an Original method, as the port's splitter's have), once that is a
// TCP or Unix socket; on unix only. Every other connection is returned as
// it is. Serve NewNativeServer on it. grpc-go asks for it only while its
// read buffer is on (ReadBufferSize > 0, the default) and
// GRPC_GO_EXPERIMENTAL_HTTP_FRAMER_READ_BUFFER_POOLING is not false;
// TestNativeIdleConnectionHeap fails when it stops asking.
func PooledReads(ln net.Listener) net.Listener { return pooledListener{ln} }

type pooledListener struct{ net.Listener }

func (l pooledListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return withPooledReads(c), nil
}

// replayingConn is a connection handed over with bytes to replay first.
type replayingConn interface {
	net.Conn
	// Original returns the connection accepted, and whether Read now
	// reads straight from it.
	Original() (original net.Conn, direct bool)
}
