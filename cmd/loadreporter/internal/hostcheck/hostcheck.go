package hostcheck

import (
	"net"
	"net/http"
	"strings"
)

// Guard refuses requests whose Host names a host this service was not
// told about: a page from a foreign site can make a browser send requests
// here through a DNS name that resolves to this machine (DNS rebinding),
// and read or change what the port serves. An IP literal cannot be
// rebound, so every IP is accepted; so are localhost names, the host of
// listen and the allowed names. hint ends the refusal: how to allow a name.
func Guard(listen string, allowed []string, hint string, next http.Handler) http.Handler {
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
		http.Error(w, "host "+r.Host+" is not served here: "+hint, http.StatusMisdirectedRequest)
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
