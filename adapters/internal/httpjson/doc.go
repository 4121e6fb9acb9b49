// Package httpjson writes the JSON answers of the adapters that answer
// HTTP themselves (the pollers' endpoints, the front's own errors). It
// must not know what they answer.
package httpjson
