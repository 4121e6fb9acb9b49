package tests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// envFlag maps LOADREPORTER_<NAME> to its flag ("" for other variables).
func envFlag(env string) string {
	name, ok := strings.CutPrefix(env, "LOADREPORTER_")
	if !ok {
		return ""
	}
	return strings.ToLower(strings.ReplaceAll(name, "_", "-"))
}

// flagName is the name of a flag argument ("--a-b=c" → "a-b"), or "" for a value.
func flagName(arg string) string {
	if !strings.HasPrefix(arg, "-") || arg == "-" || arg == "--" {
		return ""
	}
	name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	return name
}

// flagValue is the value args give flag name, in either spelling.
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if flagName(a) != name {
			continue
		}
		if _, v, ok := strings.Cut(a, "="); ok {
			return v, true
		}
		if i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// shellWords splits a command line on blanks and drops quotes: enough for
// the plain commands of unit files and docs.
func shellWords(line string) []string {
	var words []string
	for _, w := range strings.Fields(line) {
		words = append(words, strings.Trim(w, `"'`))
	}
	return words
}

// afterServe is the words after "serve", up to a shell operator or comment.
func afterServe(words []string) ([]string, bool) {
	i := slices.Index(words, "serve")
	if i < 0 {
		return nil, false
	}
	var args []string
	for _, w := range words[i+1:] {
		if strings.ContainsAny(w[:1], "|&;<>#") || w == "\\" {
			break
		}
		args = append(args, w)
	}
	return args, true
}

// joinContinuations glues lines ending in a backslash to the next.
func joinContinuations(text string) []string {
	var lines []string
	var cur strings.Builder
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		l := sc.Text()
		if strings.HasSuffix(l, "\\") {
			cur.WriteString(strings.TrimSuffix(l, "\\") + " ")
			continue
		}
		cur.WriteString(l)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	return lines
}

// envVarName matches a LOADREPORTER_* variable, commented or not.
var envVarName = regexp.MustCompile(`LOADREPORTER_[A-Z0-9_]*[A-Z0-9]`)

// systemdCall reads ExecStart, Environment= and the EnvironmentFile (by
// readFile) of one unit. Commented variables count as names to check.
func systemdCall(file string, unit []byte, readFile func(string) ([]byte, error)) (serveCall, error) {
	c := serveCall{where: file, env: map[string]string{}}
	found := false
	for _, l := range joinContinuations(string(unit)) {
		key, value, ok := strings.Cut(strings.TrimSpace(l), "=")
		switch {
		case !ok || strings.HasPrefix(key, "#"):
			c.envNames = append(c.envNames, envVarName.FindAllString(l, -1)...)
		case key == "ExecStart":
			c.args, found = afterServe(shellWords(strings.TrimLeft(value, "-@+!:")))
		case key == "Environment":
			for _, kv := range shellWords(value) {
				k, v, _ := strings.Cut(kv, "=")
				c.env[k], c.envNames = v, append(c.envNames, k)
			}
		case key == "EnvironmentFile":
			data, err := readFile(strings.TrimPrefix(value, "-"))
			if err != nil {
				return c, fmt.Errorf("%s: EnvironmentFile %s: %w", file, value, err)
			}
			parseEnvFile(data, &c)
		}
	}
	if !found {
		return c, fmt.Errorf("%s: no ExecStart=… serve", file)
	}
	return c, nil
}

// parseEnvFile adds an environment file's KEY=VALUE lines to c.
func parseEnvFile(data []byte, c *serveCall) {
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		c.envNames = append(c.envNames, envVarName.FindAllString(l, -1)...)
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			c.env[k] = strings.Trim(v, `"'`)
		}
	}
}

// markdownCalls finds `loadreporter serve …` in a document's fenced code
// blocks; every LOADREPORTER_* the document names is checked too.
func markdownCalls(file string, doc []byte) []serveCall {
	var calls []serveCall
	inCode := false
	for _, l := range joinContinuations(string(doc)) {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inCode = !inCode
			continue
		}
		if !inCode || !strings.Contains(l, "loadreporter serve") {
			continue
		}
		if args, ok := afterServe(shellWords(l)); ok {
			calls = append(calls, serveCall{where: fmt.Sprintf("%s (command %d)", file, len(calls)+1), args: args})
		}
	}
	names := envVarName.FindAllString(string(doc), -1)
	slices.Sort(names)
	return append(calls, serveCall{where: file + " (variables)", envNames: slices.Compact(names)})
}

// The parts of Kubernetes objects the checks read.
type (
	kubeObject struct {
		Kind     string   `yaml:"kind"`
		Metadata kubeMeta `yaml:"metadata"`
		Spec     struct {
			kubePodSpec `yaml:",inline"` // a Pod
			Template    struct {         // a Deployment, StatefulSet, DaemonSet, Job
				Metadata kubeMeta    `yaml:"metadata"`
				Spec     kubePodSpec `yaml:"spec"`
			} `yaml:"template"`
			Selector map[string]any `yaml:"selector"` // a Service's
			Ports    []struct {
				Name       string `yaml:"name"`
				TargetPort any    `yaml:"targetPort"`
			} `yaml:"ports"`
		} `yaml:"spec"`
	}
	kubeMeta struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	}
	kubePodSpec struct {
		Containers []kubeContainer `yaml:"containers"`
	}
	kubeContainer struct {
		Name    string   `yaml:"name"`
		Image   string   `yaml:"image"`
		Command []string `yaml:"command"`
		Args    []string `yaml:"args"`
		Env     []struct {
			Name      string `yaml:"name"`
			Value     string `yaml:"value"`
			ValueFrom *struct {
				FieldRef *struct {
					FieldPath string `yaml:"fieldPath"`
				} `yaml:"fieldRef"`
			} `yaml:"valueFrom"`
		} `yaml:"env"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		LivenessProbe  *kubeProbe `yaml:"livenessProbe"`
		ReadinessProbe *kubeProbe `yaml:"readinessProbe"`
	}
	kubeProbe struct {
		HTTPGet *struct {
			Path string `yaml:"path"`
			Port any    `yaml:"port"`
		} `yaml:"httpGet"`
	}
)

// kubePod is one pod template and where it came from.
type kubePod struct {
	where  string
	labels map[string]string
	spec   kubePodSpec
}

// kubeCalls reads every object of a manifest and returns each loadreporter
// container's call, with the problems of its pod: ports, probes, listen
// address, the engine it reads and the Service that exposes it.
func kubeCalls(file string, data []byte) ([]serveCall, []string, error) {
	var pods []kubePod
	var services []kubeObject
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var o kubeObject
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", file, err)
		}
		switch {
		case o.Kind == "Service":
			services = append(services, o)
		case o.Kind == "Pod":
			pods = append(pods, kubePod{file + ": " + o.Metadata.Name, o.Metadata.Labels, o.Spec.kubePodSpec})
		case len(o.Spec.Template.Spec.Containers) > 0:
			pods = append(pods, kubePod{file + ": " + o.Metadata.Name, o.Spec.Template.Metadata.Labels, o.Spec.Template.Spec})
		}
	}
	var calls []serveCall
	var problems []string
	for _, p := range pods {
		found := false
		for _, c := range p.spec.Containers {
			if !strings.Contains(c.Image, "loadreporter") {
				continue
			}
			found = true
			call, probs := kubeReporter(p, c)
			calls, problems = append(calls, call), append(problems, probs...)
			problems = append(problems, kubeServiceProblems(call.where, p, c, services)...)
		}
		if !found {
			problems = append(problems, p.where+": no loadreporter container")
		}
	}
	return calls, problems, nil
}

// varRef is a Kubernetes $(VAR) reference in an argument.
var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// kubeReporter turns one reporter container into a call, with the
// problems a pod would show only when it runs.
func kubeReporter(p kubePod, c kubeContainer) (serveCall, []string) {
	call := serveCall{where: p.where + "/" + c.Name, env: map[string]string{}}
	var problems []string
	if len(c.Command) > 0 { // else the image's entrypoint: /loadreporter serve
		args, ok := afterServe(c.Command)
		if !ok {
			problems = append(problems, call.where+": command runs no `serve`")
		}
		call.args = args
	}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			v = "placeholder"
			if e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP" {
				v = "10.0.0.1"
			}
		}
		call.env[e.Name], call.envNames = v, append(call.envNames, e.Name)
	}
	for _, a := range c.Args {
		call.args = append(call.args, varRef.ReplaceAllStringFunc(a, func(ref string) string {
			name := varRef.FindStringSubmatch(ref)[1]
			if v, ok := call.env[name]; ok {
				return v
			}
			problems = append(problems, fmt.Sprintf("%s: %s is not in the container's env: Kubernetes passes it literally", call.where, ref))
			return ref
		}))
	}
	ports := map[string]string{}
	for _, cp := range c.Ports {
		ports[fmt.Sprint(cp.ContainerPort)] = fmt.Sprint(cp.ContainerPort)
		ports[cp.Name] = fmt.Sprint(cp.ContainerPort)
	}
	if _, ok := ports[servedPort]; !ok {
		problems = append(problems, fmt.Sprintf("%s: no containerPort %s", call.where, servedPort))
	}
	listen := setting(call, "listen", "0.0.0.0:"+servedPort) // the image's LOADREPORTER_LISTEN
	problems = append(problems, checkListen(call.where, listen)...)
	for _, pr := range []struct {
		kind, want string
		probe      *kubeProbe
	}{{"livenessProbe", livenessPath, c.LivenessProbe}, {"readinessProbe", readinessPath, c.ReadinessProbe}} {
		switch {
		case pr.probe == nil || pr.probe.HTTPGet == nil:
			problems = append(problems, fmt.Sprintf("%s: no %s.httpGet", call.where, pr.kind))
		case pr.probe.HTTPGet.Path != pr.want || ports[fmt.Sprint(pr.probe.HTTPGet.Port)] != servedPort:
			problems = append(problems, fmt.Sprintf("%s: %s GET %s on port %v, want %s on %s", call.where, pr.kind, pr.probe.HTTPGet.Path, pr.probe.HTTPGet.Port, pr.want, servedPort))
		default:
			call.probes = append(call.probes, pr.probe.HTTPGet.Path)
		}
	}
	return call, append(problems, kubeEngineProblems(call, p, c)...)
}

// setting is the value a call gives a flag: the argument, else its
// variable, else def.
func setting(c serveCall, flag, def string) string {
	if v, ok := flagValue(c.args, flag); ok {
		return v
	}
	if v, ok := c.env[envName(flag)]; ok {
		return v
	}
	return def
}

// envName is the LOADREPORTER_* variable of a flag.
func envName(flag string) string {
	return "LOADREPORTER_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// kubeEngineProblems: the reporter reads an engine of its pod on the port
// that engine serves; routers know the worker by that port in
// --worker-addr, or, in front mode, by the front's port, which the
// reporter's container then declares; for vLLM it knows the engine's
// --max-num-seqs.
func kubeEngineProblems(call serveCall, p kubePod, reporter kubeContainer) []string {
	var problems []string
	u, err := url.Parse(setting(call, "engine-url", ""))
	if err != nil || u.Port() == "" {
		return []string{fmt.Sprintf("%s: --engine-url %q: want http://127.0.0.1:PORT", call.where, setting(call, "engine-url", ""))}
	}
	var engine *kubeContainer
	for i, c := range p.spec.Containers {
		if c.Name == reporter.Name {
			continue
		}
		port, _ := flagValue(append(slices.Clone(c.Command), c.Args...), "port")
		for _, cp := range c.Ports {
			if fmt.Sprint(cp.ContainerPort) == u.Port() {
				port = u.Port()
			}
		}
		if port == u.Port() {
			engine = &p.spec.Containers[i]
		}
	}
	if engine == nil {
		return []string{fmt.Sprintf("%s: --engine-url port %s is no other container's port", call.where, u.Port())}
	}
	workerPort := u.Port()
	if front := setting(call, "front-listen", ""); front != "" {
		_, workerPort, _ = net.SplitHostPort(front)
		declared := false
		for _, cp := range reporter.Ports {
			declared = declared || fmt.Sprint(cp.ContainerPort) == workerPort
		}
		if !declared {
			problems = append(problems, fmt.Sprintf("%s: --front-listen port %s is not a containerPort of the reporter", call.where, workerPort))
		}
	}
	if _, port, _ := net.SplitHostPort(setting(call, "worker-addr", "")); port != workerPort {
		problems = append(problems, fmt.Sprintf("%s: --worker-addr %q: routers know the worker by port %s", call.where, setting(call, "worker-addr", ""), workerPort))
	}
	if setting(call, "source", "sim") == "vllm-metrics" {
		seqs, _ := flagValue(append(slices.Clone(engine.Command), engine.Args...), "max-num-seqs")
		if got := setting(call, "vllm-max-running-requests", ""); got != seqs {
			problems = append(problems, fmt.Sprintf("%s: --vllm-max-running-requests %q, but the engine's --max-num-seqs is %q", call.where, got, seqs))
		}
	}
	return problems
}

// kubeServiceProblems: some Service selects the pod and targets the
// reporter's port.
func kubeServiceProblems(where string, p kubePod, c kubeContainer, services []kubeObject) []string {
	for _, s := range services {
		selected := len(s.Spec.Selector) > 0
		for k, v := range s.Spec.Selector {
			selected = selected && p.labels[k] == fmt.Sprint(v)
		}
		for _, sp := range s.Spec.Ports {
			for _, cp := range c.Ports {
				target := fmt.Sprint(sp.TargetPort)
				if selected && fmt.Sprint(cp.ContainerPort) == servedPort && (target == cp.Name || target == servedPort) {
					return nil
				}
			}
		}
	}
	return []string{fmt.Sprintf("%s: no Service selects the pod and targets port %s", where, servedPort)}
}
