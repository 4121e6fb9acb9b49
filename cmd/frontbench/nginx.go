package main

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
)

// nginxConfig is what the nginx reference is told: where it listens, the
// engine it passes to, its folder and its worker count.
type nginxConfig struct {
	Dir     string // absolute: the prefix (-p), and where logs, the pid and temp files go
	Listen  string // 127.0.0.1:PORT
	Engine  string // 127.0.0.1:PORT
	Workers int
	// AsRoot writes `user root;`: nginx started as root switches its
	// workers to the user named there (www-data by default), who cannot
	// read a folder of root's.
	AsRoot bool
	// MaxConns is each worker's connection limit; a proxied stream holds
	// two (client and engine).
	MaxConns int
}

// render is nginx.conf: a streaming reverse proxy as an operator would
// configure one in front of an inference engine — HTTP/1.1 and pooled
// keep-alive connections to the engine, nothing buffered either way (every
// SSE event passed on as it comes), no timeout a generation would hit, no
// access log — listening on loopback only. It sets the same X-Forwarded-*
// headers the front sets, so that both do the same work.
func (c nginxConfig) render() (string, error) {
	if !filepath.IsAbs(c.Dir) || strings.ContainsAny(c.Dir, "; \t\n\"'{}$") {
		return "", fmt.Errorf("nginx folder %q: want an absolute path without spaces, quotes, braces, '$' or ';'", c.Dir)
	}
	for _, a := range []struct{ name, addr string }{{"listen", c.Listen}, {"engine", c.Engine}} {
		host, port, err := net.SplitHostPort(a.addr)
		if err != nil {
			return "", fmt.Errorf("nginx %s address %q: %v", a.name, a.addr, err)
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			return "", fmt.Errorf("nginx %s address %q: want a loopback IP (the bench talks only to 127.0.0.1)", a.name, a.addr)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return "", fmt.Errorf("nginx %s address %q: want a port in [1, 65535]", a.name, a.addr)
		}
	}
	if c.Workers < 1 {
		return "", errors.New("nginx workers: want at least 1")
	}
	if c.MaxConns < 64 {
		return "", errors.New("nginx worker connections: want at least 64")
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("# Written by frontbench: the reference streaming reverse proxy, on loopback only.")
	if c.AsRoot {
		p("user root;")
	}
	p("worker_processes %d;", c.Workers)
	p("worker_rlimit_nofile %d;", 2*c.MaxConns+64)
	p("pid %s;", filepath.Join(c.Dir, "nginx.pid"))
	p("error_log %s warn;", filepath.Join(c.Dir, "error.log"))
	p("events {")
	p("    worker_connections %d;", c.MaxConns)
	p("}")
	p("http {")
	p("    access_log off;")
	for _, t := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		p("    %s_temp_path %s;", t, filepath.Join(c.Dir, t+"_temp"))
	}
	p("    upstream engine {")
	p("        server %s;", c.Engine)
	p("        keepalive 256;")
	p("        keepalive_requests 1000000;")
	p("    }")
	p("    server {")
	p("        listen %s;", c.Listen)
	p("        keepalive_requests 1000000;")
	p("        client_max_body_size 0;")
	p("        location / {")
	p("            proxy_pass http://engine;")
	p("            proxy_http_version 1.1;")
	p(`            proxy_set_header Connection "";`)
	p("            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;")
	p("            proxy_set_header X-Forwarded-Host $host;")
	p("            proxy_set_header X-Forwarded-Proto $scheme;")
	p("            proxy_buffering off;")
	p("            proxy_request_buffering off;")
	p("            proxy_read_timeout 1h;")
	p("            proxy_send_timeout 1h;")
	p("        }")
	p("    }")
	p("}")
	return b.String(), nil
}
