package app

import (
	"net"
	"net/http"
	"strings"
)

// checkHost refuses requests whose Host names a host this service was not
// told about, when no --auth-token guards the port: a page from a foreign
// site can make a browser send requests here through a DNS name that
// resolves to this machine (DNS rebinding), and without a token nothing
// else would stop it from calling AdminService. An IP literal cannot be
// rebound, so every IP is accepted; so are localhost names, the host of
// --listen and the names given by --allowed-host.
func checkHost(listen string, allowed []string, next http.Handler) http.Handler {
	names := map[string]bool{"localhost": true}
	if host, _, err := net.SplitHostPort(listen); err == nil && host != "" {
		names[strings.ToLower(host)] = true
	}
	for _, a := range allowed {
		if a = strings.ToLower(strings.TrimSpace(a)); a != "" {
			names[a] = true
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hostAllowed(r.Host, names) {
			next.ServeHTTP(w, r)
			return
		}
		http.Error(w, "host "+r.Host+" is not served here: add it with --allowed-host, or set --auth-token",
			http.StatusMisdirectedRequest)
	})
}

func hostAllowed(hostport string, names map[string]bool) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "" || net.ParseIP(host) != nil || names[host] || strings.HasSuffix(host, ".localhost") {
		return true
	}
	return false
}
