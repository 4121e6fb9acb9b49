package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// directives are the config's lines without indentation or comments.
func directives(conf string) []string {
	var out []string
	for line := range strings.Lines(conf) {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

func TestNginxConfigIsAStreamingProxyOnLoopback(t *testing.T) {
	t.Parallel()
	c := nginxConfig{Dir: "/tmp/fb", Listen: "127.0.0.1:8081", Engine: "127.0.0.1:30000", Workers: 2, AsRoot: true, MaxConns: 4000}
	conf, err := c.render()
	if err != nil {
		t.Fatal(err)
	}
	got := directives(conf)
	for _, want := range []string{
		"user root;",
		"worker_processes 2;",
		"worker_connections 4000;",
		"pid /tmp/fb/nginx.pid;",
		"error_log /tmp/fb/error.log warn;",
		"access_log off;",
		"server 127.0.0.1:30000;",
		"keepalive 256;",
		"listen 127.0.0.1:8081;",
		"proxy_pass http://engine;",
		"proxy_http_version 1.1;",
		`proxy_set_header Connection "";`,
		"proxy_buffering off;",
		"proxy_request_buffering off;",
		"proxy_read_timeout 1h;",
		"proxy_temp_path /tmp/fb/proxy_temp;",
		"client_body_temp_path /tmp/fb/client_body_temp;",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("config lacks %q:\n%s", want, conf)
		}
	}
	for _, d := range got {
		if strings.HasPrefix(d, "listen ") && d != "listen 127.0.0.1:8081;" {
			t.Errorf("config listens elsewhere too: %q", d)
		}
	}
	c.AsRoot = false
	conf, err = c.render()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(directives(conf), "user root;") {
		t.Error("not started as root, the config still names user root")
	}
}

func TestNginxConfigRefusesWhatWouldLeaveLoopbackOrBreakTheFile(t *testing.T) {
	t.Parallel()
	ok := nginxConfig{Dir: "/tmp/fb", Listen: "127.0.0.1:8081", Engine: "127.0.0.1:30000", Workers: 2, MaxConns: 4000}
	for name, mutate := range map[string]func(*nginxConfig){
		"listen on every address": func(c *nginxConfig) { c.Listen = "0.0.0.0:8081" },
		"listen by name":          func(c *nginxConfig) { c.Listen = "localhost:8081" },
		"engine off the machine":  func(c *nginxConfig) { c.Engine = "10.0.0.1:30000" },
		"no port":                 func(c *nginxConfig) { c.Listen = "127.0.0.1" },
		"port 0":                  func(c *nginxConfig) { c.Listen = "127.0.0.1:0" },
		"relative folder":         func(c *nginxConfig) { c.Dir = "tmp/fb" },
		"folder with a ';'":       func(c *nginxConfig) { c.Dir = "/tmp/a;b" },
		"no worker":               func(c *nginxConfig) { c.Workers = 0 },
		"too few connections":     func(c *nginxConfig) { c.MaxConns = 10 },
	} {
		c := ok
		mutate(&c)
		if conf, err := c.render(); err == nil {
			t.Errorf("%s: rendered\n%s", name, conf)
		}
	}
	if _, err := ok.render(); err != nil {
		t.Errorf("the unmutated config: %v", err)
	}
}

// nginx itself accepts the config (nginx -t), when it is installed.
func TestNginxAcceptsTheConfig(t *testing.T) {
	t.Parallel()
	bin, err := findNginx("")
	if err != nil {
		t.Skip("nginx not installed (tests/services.sh nginx installs it):", err)
	}
	dir := t.TempDir()
	conf, err := nginxConfig{Dir: dir, Listen: "127.0.0.1:8081", Engine: "127.0.0.1:30000", Workers: 2,
		AsRoot: os.Geteuid() == 0, MaxConns: 4000}.render()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-t", "-q", "-p", dir, "-c", path, "-e", filepath.Join(dir, "error.log"), "-g", "daemon off;").CombinedOutput()
	if err != nil {
		t.Fatalf("nginx -t: %v\n%s\n%s", err, out, conf)
	}
}
