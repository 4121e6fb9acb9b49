// Package connectcode is the one table between the domain's error codes
// and Connect's, for every handler and client that speaks Connect, gRPC or
// gRPC-Web (the RPC services, the ORCA stream): a server sends the Connect
// code of a domain error through ToConnect, a client reads a Connect error
// back into the domain's model through FromConnect, and both scan the same
// rows, so the two directions cannot drift apart.
//
// It must not know any service, message or route: it sees errors only.
package connectcode
