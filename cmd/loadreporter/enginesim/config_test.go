package enginesim

import (
	"bytes"
	"errors"
	"flag"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/envflag"
)

func noEnv(string) string { return "" }

// TestParseFlagsAndEnvironment: every flag is read from the command line
// and, as LOADREPORTER_<NAME>, from the environment; the command line
// wins.
func TestParseFlagsAndEnvironment(t *testing.T) {
	t.Parallel()
	c, err := Parse(nil, noEnv, &bytes.Buffer{})
	if err != nil || !reflect.DeepEqual(c, DefaultConfig()) {
		t.Fatalf("no flags: %+v %v, want the defaults", c, err)
	}
	for _, tc := range []struct {
		flag, value string
		got         func(Config) any
		want        any
	}{
		{"listen", "127.0.0.1:0", func(c Config) any { return c.Listen }, "127.0.0.1:0"},
		{"grpc-listen", "127.0.0.1:30001", func(c Config) any { return c.GRPCListen }, "127.0.0.1:30001"},
		{"served-model-name", "m", func(c Config) any { return c.ServedModelName }, "m"},
		{"api-key", "k", func(c Config) any { return c.APIKey }, "k"},
		{"dp-size", "8", func(c Config) any { return c.Params.DPSize }, 8},
		{"max-running-requests", "64", func(c Config) any { return c.Params.MaxRunningRequests }, 64},
		{"max-total-tokens", "200000", func(c Config) any { return c.Params.MaxTotalNumTokens }, int64(200000)},
		{"context-length", "8192", func(c Config) any { return c.Params.ContextLength }, 8192},
		{"chunked-prefill-size", "4096", func(c Config) any { return c.Params.ChunkedPrefillSize }, 4096},
		{"load-balance-method", "total_requests", func(c Config) any { return c.Params.LoadBalanceMethod }, "total_requests"},
		{"step-overhead", "6ms", func(c Config) any { return c.Params.StepOverhead }, 6 * time.Millisecond},
		{"decode-per-seq", "150us", func(c Config) any { return c.Params.DecodePerSeq }, 150 * time.Microsecond},
		{"decode-per-1k-kv-tokens", "40us", func(c Config) any { return c.Params.DecodePer1kKVTokens }, 40 * time.Microsecond},
		{"prefill-per-token", "30us", func(c Config) any { return c.Params.PrefillPerToken }, 30 * time.Microsecond},
		{"load-snapshot-publish-interval", "1", func(c Config) any { return c.Params.LoadSnapshotPublishInterval }, 1},
		{"decode-log-interval", "10", func(c Config) any { return c.Params.DecodeLogInterval }, 10},
		{"default-max-tokens", "512", func(c Config) any { return c.DefaultMaxTokens }, 512},
		{"load-publish-endpoint", "tcp://*:5560", func(c Config) any { return c.LoadPublishEndpoint }, "tcp://*:5560"},
		{"vllm-metrics", "true", func(c Config) any { return c.VLLMMetrics }, true},
		{"shutdown-grace", "1s", func(c Config) any { return c.ShutdownGrace }, time.Second},
	} {
		c, err := Parse([]string{"--" + tc.flag + "=" + tc.value}, noEnv, &bytes.Buffer{})
		if err != nil || !reflect.DeepEqual(tc.got(c), tc.want) {
			t.Errorf("--%s=%s: %v %v, want %v", tc.flag, tc.value, tc.got(c), err, tc.want)
		}
		env := map[string]string{envflag.Name(tc.flag): tc.value}
		c, err = Parse(nil, func(k string) string { return env[k] }, &bytes.Buffer{})
		if err != nil || !reflect.DeepEqual(tc.got(c), tc.want) {
			t.Errorf("%s=%s: %v %v, want %v", envflag.Name(tc.flag), tc.value, tc.got(c), err, tc.want)
		}
	}
	env := map[string]string{"LOADREPORTER_DP_SIZE": "3"}
	if c, err := Parse([]string{"--dp-size", "5"}, func(k string) string { return env[k] }, &bytes.Buffer{}); err != nil || c.Params.DPSize != 5 {
		t.Errorf("command line and environment: dp_size %d %v, want the command line's 5", c.Params.DPSize, err)
	}
}

// TestParseRefusesNamingTheFlag: a value out of range is refused in one
// line that names the flag (or variable) and says what is allowed.
func TestParseRefusesNamingTheFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--dp-size", "0"}, nil, "--dp-size 0: want 1 to 1024"},
		{[]string{"--max-running-requests", "-2"}, nil, "--max-running-requests -2:"},
		{[]string{"--max-total-tokens", "1"}, nil, "--max-total-tokens 1:"},
		{[]string{"--chunked-prefill-size", "0"}, nil, "--chunked-prefill-size 0:"},
		{[]string{"--decode-per-seq", "2h"}, nil, "--decode-per-seq 2h0m0s: want a duration from 0 to 1h"},
		{[]string{"--step-overhead", "-1ms"}, nil, "--step-overhead -1ms:"},
		{[]string{"--load-snapshot-publish-interval", "0"}, nil, "--load-snapshot-publish-interval 0:"},
		{[]string{"--decode-log-interval", "0"}, nil, "--decode-log-interval 0:"},
		{[]string{"--load-balance-method", "random"}, nil, `--load-balance-method "random": want round_robin or total_requests`},
		{[]string{"--listen", "nope"}, nil, `--listen "nope": want HOST:PORT`},
		{[]string{"--grpc-listen", "30001"}, nil, `--grpc-listen "30001": want HOST:PORT`},
		{[]string{"--served-model-name", " "}, nil, "--served-model-name is empty"},
		{[]string{"--default-max-tokens", "0"}, nil, "--default-max-tokens 0: want 1 to 131071"},
		{[]string{"--context-length", "100", "--default-max-tokens", "100"}, nil, "--default-max-tokens 100: want 1 to 99"},
		{[]string{"--load-publish-endpoint", "udp://h:1"}, nil, `--load-publish-endpoint "udp://h:1": only tcp://`},
		{[]string{"--load-publish-endpoint", "tcp://h:65535"}, nil, "--load-publish-endpoint \"tcp://h:65535\": dp_size 1 needs ports 65535..65536"},
		{[]string{"--shutdown-grace", "0s"}, nil, "--shutdown-grace 0s: want > 0"},
		{[]string{"--step-overhead", "9"}, nil, `--step-overhead "9": want a duration like 500ms, 3s or 1m`},
		{nil, map[string]string{"LOADREPORTER_DP_SIZE": "two"}, `LOADREPORTER_DP_SIZE="two": want a whole number`},
		{[]string{"extra"}, nil, `engine-sim takes no arguments, got ["extra"]`},
	} {
		_, err := Parse(tc.args, func(k string) string { return tc.env[k] }, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q %v: %v, want one line with %q", tc.args, tc.env, err, tc.want)
		}
	}
	if _, err := New(Config{}); err == nil {
		t.Error("New took an empty configuration")
	}
}

// TestHelpListsEveryFlag: --help prints the usage with every flag, its
// default and its variable.
func TestHelpListsEveryFlag(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	_, err := Parse([]string{"--help"}, noEnv, &out)
	if !errors.Is(err, flag.ErrHelp) || !strings.HasPrefix(out.String(), "Usage: loadreporter engine-sim") {
		t.Fatalf("--help: %v %.60q", err, out.String())
	}
	for _, name := range []string{"dp-size", "max-running-requests", "max-total-tokens", "step-overhead", "decode-per-seq",
		"prefill-per-token", "load-snapshot-publish-interval", "load-publish-endpoint", "vllm-metrics"} {
		if !strings.Contains(out.String(), "--"+name+"\n") || !strings.Contains(out.String(), envflag.Name(name)) {
			t.Errorf("--help does not list --%s with %s", name, envflag.Name(name))
		}
	}
}
