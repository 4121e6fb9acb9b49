// Package connsplit sorts the plaintext connections accepted on one TCP
// port between two servers by the connection's first request: a native
// gRPC request (HTTP/2 with prior knowledge, content-type
// application/grpc or application/grpc+codec) goes to the GRPC listener,
// for grpc-go's own server transport; everything else (HTTP/1.x, an
// HTTP/2 connection whose first request is Connect, gRPC-Web or any other
// HTTP, a connection that shows nothing in time) goes to the Other
// listener, for net/http.
//
// To see an HTTP/2 client's first request it sends the server preface
// (an empty SETTINGS frame) itself, reads the client's frames up to the
// first HEADERS, then hands the connection over with every byte it read
// replayed, less the client's acknowledgement of that empty SETTINGS,
// which the chosen server never sent. It answers nothing else: the chosen
// server reads the client's frames and answers them as if it had been
// first. Once nothing is left to replay or drop, the connection says so
// (Original), so that a server may read the accepted connection its own
// way.
//
// It must not know loadreporter's services, procedures, authentication or
// TLS (it handles plaintext only), nor which server sits behind each
// listener: it knows HTTP/1 from HTTP/2 and a gRPC content-type from
// another, nothing more.
package connsplit
