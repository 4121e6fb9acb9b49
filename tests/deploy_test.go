package tests

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// What every deployment must agree with: the served port and probe paths.
const (
	servedPort    = "8080"
	livenessPath  = "/healthz"
	readinessPath = "/readyz"
)

// serveCall is what one manifest hands `loadreporter serve`.
type serveCall struct {
	where    string            // file and container, for messages
	args     []string          // the flags after "serve"
	env      map[string]string // its environment; values from elsewhere are placeholders
	envNames []string          // every LOADREPORTER_* it names, commented examples included
	probes   []string          // HTTP paths it expects the reporter to answer
}

// helpFlag is one flag line of `serve --help` ("  --name").
var helpFlag = regexp.MustCompile(`(?m)^  --([a-z0-9][a-z0-9-]*)$`)

// parseServeHelp reads the flag names out of `serve --help`.
func parseServeHelp(help string) (map[string]bool, error) {
	flags := map[string]bool{}
	for _, m := range helpFlag.FindAllStringSubmatch(help, -1) {
		flags[m[1]] = true
	}
	if !flags["listen"] || !flags["source"] || len(flags) < 10 {
		return nil, fmt.Errorf("serve --help lists %d flags (%v): has its format changed?\n%s", len(flags), flags, help)
	}
	return flags, nil
}

// checkNames reports every flag and LOADREPORTER_* variable of c that
// serve does not accept.
func checkNames(c serveCall, flags map[string]bool) []string {
	var problems []string
	for _, a := range c.args {
		if n := flagName(a); n != "" && !flags[n] {
			problems = append(problems, fmt.Sprintf("%s: --%s: serve has no such flag", c.where, n))
		}
	}
	for _, e := range c.envNames {
		if n := envFlag(e); n != "" && !flags[n] {
			problems = append(problems, fmt.Sprintf("%s: %s: serve has no flag --%s", c.where, e, n))
		}
	}
	return problems
}

// checkListen reports a listen address routers and probes cannot reach.
func checkListen(where, listen string) []string {
	host, port, err := net.SplitHostPort(listen)
	switch {
	case err != nil:
		return []string{fmt.Sprintf("%s: listen %q: %v", where, listen, err)}
	case port != servedPort:
		return []string{fmt.Sprintf("%s: listens on port %s, want %s", where, port, servedPort)}
	case host != "0.0.0.0" && host != "" && host != "::":
		return []string{fmt.Sprintf("%s: listens on %s: routers and probes on other addresses cannot reach it", where, host)}
	}
	return nil
}

// TestDeployManifestsUseServedFlags builds the binary, reads every flag
// `serve --help` lists, and checks every manifest, unit, environment file
// and deploy document against it: names, values (each call is parsed by
// the binary itself) and the paths its probes expect.
func TestDeployManifestsUseServedFlags(t *testing.T) {
	t.Parallel()
	bin := loadreporterBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	help, err := exec.CommandContext(ctx, bin, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("serve --help: %v\n%s", err, help)
	}
	flags, err := parseServeHelp(string(help))
	if err != nil {
		t.Fatal(err)
	}

	calls, problems := readDeployCalls(t)
	if len(calls) < 4 {
		t.Fatalf("found %d calls of loadreporter serve in deploy/ and docs/, want the SGLang and vLLM pods, the systemd unit and the docs", len(calls))
	}
	probes := map[string]bool{}
	for _, c := range calls {
		t.Logf("%s: %d arguments, %d variables", c.where, len(c.args), len(c.envNames))
		problems = append(problems, checkNames(c, flags)...)
		if err := parseWithBinary(ctx, bin, c); err != nil {
			problems = append(problems, err.Error())
		}
		for _, p := range c.probes {
			probes[p] = true
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
	if !probes[livenessPath] || !probes[readinessPath] {
		t.Errorf("probe paths %v: want both %s and %s", probes, livenessPath, readinessPath)
	}
	checkProbesServed(t, ctx, bin, probes)
	verifySystemdUnit(t, ctx, bin)
}

// readDeployCalls extracts every call from deploy/ and docs/deploy.md.
func readDeployCalls(t *testing.T) ([]serveCall, []string) {
	t.Helper()
	var calls []serveCall
	var problems []string
	kube, _ := filepath.Glob("../deploy/kubernetes/*.yaml")
	units, _ := filepath.Glob("../deploy/systemd/*.service")
	if len(kube) < 2 || len(units) < 1 {
		t.Fatalf("deploy/: %d Kubernetes manifests and %d systemd units, want the SGLang and vLLM manifests and a unit", len(kube), len(units))
	}
	for _, f := range kube {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c, p, err := kubeCalls(filepath.Base(f), data)
		if err != nil {
			t.Fatal(err)
		}
		calls, problems = append(calls, c...), append(problems, p...)
	}
	for _, f := range units {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c, err := systemdCall(filepath.Base(f), data, func(name string) ([]byte, error) {
			return os.ReadFile(filepath.Join(filepath.Dir(f), filepath.Base(name)))
		})
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, c)
	}
	doc, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	return append(calls, markdownCalls("docs/deploy.md", doc)...), problems
}

// parseWithBinary hands c's flags and environment to the binary's own
// parser, ended by --help so it stops there: a bad value or a stray
// argument fails, nothing is served.
func parseWithBinary(ctx context.Context, bin string, c serveCall) error {
	cmd := exec.CommandContext(ctx, bin, append(append([]string{"serve"}, c.args...), "--help")...)
	cmd.Env = []string{}
	for k, v := range c.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Usage: loadreporter serve") {
		return fmt.Errorf("%s: `%s` with its environment fails: %v\n%s", c.where, strings.Join(append([]string{"serve"}, c.args...), " "), err, firstLines(string(out), 3))
	}
	return nil
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// checkProbesServed runs the binary on an ephemeral loopback port and
// expects HTTP 200 from every probe path the manifests use.
func checkProbesServed(t *testing.T, ctx context.Context, bin string, probes map[string]bool) {
	t.Helper()
	srv := serveBinary(t, ctx, bin)
	defer func() {
		_ = srv.cmd.Process.Signal(os.Interrupt)
		select {
		case <-srv.exited:
			if srv.err != nil {
				t.Errorf("serve after SIGINT: %v\n%s", srv.err, srv.stderr.String())
			}
		case <-ctx.Done():
			t.Errorf("serve still running after SIGINT\n%s", srv.stderr.String())
		}
	}()
	client := &http.Client{Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	for p := range probes {
		resp, err := client.Get("http://" + srv.addr + p)
		code := 0
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			code = resp.StatusCode
		}
		if code != http.StatusOK {
			t.Errorf("GET %s: %d, %v; a probe on it would fail", p, code, err)
		}
	}
}

// verifySystemdUnit runs systemd-analyze verify on the unit, pointed at
// the built binary and the example environment file, when the machine has
// systemd-analyze; any warning fails.
func verifySystemdUnit(t *testing.T, ctx context.Context, bin string) {
	t.Helper()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not installed: the unit's syntax is not verified")
		return
	}
	unit, err := os.ReadFile("../deploy/systemd/loadreporter.service")
	if err != nil {
		t.Fatal(err)
	}
	env, err := filepath.Abs("../deploy/systemd/loadreporter.env")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(unit), "/usr/local/bin/loadreporter", bin)
	s = strings.ReplaceAll(s, "/etc/loadreporter/loadreporter.env", env)
	path := filepath.Join(t.TempDir(), "loadreporter.service")
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, analyze, "verify", path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify loadreporter.service: %v\n%s", err, out)
	}
}

// cannedHelp is `serve --help` in the shape the binary prints it.
const cannedHelp = `Usage: loadreporter serve [flags]

Flags (each also settable as LOADREPORTER_<NAME>):
  --listen
        one address (default 127.0.0.1:8080; env LOADREPORTER_LISTEN)
  --source
        snapshot source (default sim; env LOADREPORTER_SOURCE)
  --engine-url
        where the source reads the engine (default none; env LOADREPORTER_ENGINE_URL)
  --vllm-max-running-requests
        vllm (default 0; env LOADREPORTER_VLLM_MAX_RUNNING_REQUESTS)
  --worker-addr
  --auth-token
  --database-url
  --tls-cert
  --model
  --zone
`

// badPod breaks one rule per line the checkers must catch.
const badPod = `apiVersion: v1
kind: Pod
metadata: {name: bad, labels: {app: bad}}
spec:
  containers:
    - name: engine
      image: vllm/vllm-openai
      args: [m, --port=8000, --max-num-seqs=128]
      ports: [{containerPort: 8000}]
    - name: loadreporter
      image: loadreporter:latest
      args: [--source=vllm-metrics, --engine-urll=http://127.0.0.1:8000, --engine-url, "http://127.0.0.1:9000",
             --listen=127.0.0.1:8080, --worker-addr=$(NODE_IP):8000, --vllm-max-running-requests=256]
      env: [{name: LOADREPORTER_LISTN, value: "0.0.0.0:8080"}]
      ports: [{name: http, containerPort: 9090}]
      livenessProbe: {httpGet: {path: /health, port: http}}
---
apiVersion: v1
kind: Service
metadata: {name: bad}
spec:
  selector: {app: other}
  ports: [{port: 8080, targetPort: 8080}]
`

// TestDeployCheckersCatchMistakes proves the checkers fail a bad
// manifest, unit, environment file and document, rule by rule, and pass
// good ones.
func TestDeployCheckersCatchMistakes(t *testing.T) {
	t.Parallel()
	flags, err := parseServeHelp(cannedHelp)
	if err != nil {
		t.Fatal(err)
	}
	calls, problems, err := kubeCalls("bad.yaml", []byte(badPod))
	if err != nil || len(calls) != 1 {
		t.Fatalf("kubeCalls: %d calls, %v", len(calls), err)
	}
	problems = append(problems, checkNames(calls[0], flags)...)
	unit := "[Service]\nExecStart=/usr/bin/loadreporter serve --sauce sim \\\n  --listen 0.0.0.0:8080\nEnvironment=LOADREPORTER_ZONE=a LOADREPORTER_ZONES=b\nEnvironmentFile=-/etc/x.env\n"
	c, err := systemdCall("bad.service", []byte(unit), func(name string) ([]byte, error) {
		if name != "/etc/x.env" {
			return nil, os.ErrNotExist
		}
		return []byte("LOADREPORTER_MODEL=m\n#LOADREPORTER_DATABASE_URI=postgres://\n"), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	problems = append(problems, checkNames(c, flags)...)
	doc := "Text names LOADREPORTER_TLS_CERTS and LOADREPORTER_<NAME>.\n```sh\nloadreporter serve --source sim \\\n  --worker-adr 10.0.0.7:30000 | tee log\n```\n"
	for _, c := range markdownCalls("bad.md", []byte(doc)) {
		problems = append(problems, checkNames(c, flags)...)
	}
	got := strings.Join(problems, "\n")
	for _, want := range []string{
		"bad.yaml: bad/loadreporter: --engine-urll: serve has no such flag",
		"LOADREPORTER_LISTN: serve has no flag --listn",
		"listens on 127.0.0.1: routers and probes on other addresses cannot reach it",
		"$(NODE_IP) is not in the container's env",
		"no containerPort 8080",
		"livenessProbe GET /health on port http, want /healthz on 8080",
		"no readinessProbe.httpGet",
		"--engine-url port 9000 is no other container's port",
		"no Service selects the pod and targets port 8080",
		"bad.service: --sauce: serve has no such flag",
		"bad.service: LOADREPORTER_ZONES: serve has no flag --zones",
		"bad.service: LOADREPORTER_DATABASE_URI: serve has no flag --database-uri",
		"bad.md (command 1): --worker-adr: serve has no such flag",
		"bad.md (variables): LOADREPORTER_TLS_CERTS: serve has no flag --tls-certs",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no problem %q among:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "\n") + 1; n != 14 {
		t.Errorf("%d problems, want 14:\n%s", n, got)
	}

	// Fixed, the pod passes, and a vLLM --max-num-seqs mismatch is caught.
	good := strings.NewReplacer("--engine-urll=http://127.0.0.1:8000, ", "", "9000", "8000", "127.0.0.1:8080", "0.0.0.0:8080",
		"$(NODE_IP)", "$(POD_IP)", `{name: LOADREPORTER_LISTN, value: "0.0.0.0:8080"}`, `{name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}`, "9090", "8080", "/health,", "/healthz,", "app: other", "app: bad").Replace(badPod)
	good = strings.Replace(good, "      livenessProbe:", "      readinessProbe: {httpGet: {path: /readyz, port: 8080}}\n      livenessProbe:", 1)
	calls, problems, err = kubeCalls("good.yaml", []byte(good))
	if err != nil || len(calls) != 1 {
		t.Fatalf("kubeCalls: %d calls, %v", len(calls), err)
	}
	problems = append(problems, checkNames(calls[0], flags)...)
	if len(problems) != 1 || !strings.Contains(problems[0], `--vllm-max-running-requests "256", but the engine's --max-num-seqs is "128"`) {
		t.Errorf("good pod with a max-num-seqs mismatch: problems %q", problems)
	}
}

// TestTheShippedEnvFileRefusesItsPlaceholder: the systemd environment file
// ships a token that does not work: serve started with it unedited stops
// at once, naming the placeholder, instead of serving a guessable token.
func TestTheShippedEnvFileRefusesItsPlaceholder(t *testing.T) {
	t.Parallel()
	bin := loadreporterBinary(t)
	data, err := os.ReadFile("../deploy/systemd/loadreporter.env")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{}
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			env = append(env, line)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--listen", "127.0.0.1:0", "--front-listen", "127.0.0.1:0")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--auth-token is still the shipped placeholder") {
		t.Fatalf("serve with the unedited env file: %v\n%s", err, out)
	}
}
