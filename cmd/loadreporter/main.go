package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/app"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/buildinfo"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/cli"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/enginesim"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/fleet"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/envflag"
	"github.com/loadreporter/loadreporter/domain"
)

const help = `Usage: loadreporter <command> [flags]

Commands:
  serve      serve load reports (Monitor, health, metrics) on one port
  watch      dial a worker as a router and print its reports live
  fleet      watch many workers as a router and serve their loads (page and JSON)
  audit      query the recorded history: reports, outages, rank-stats, gaps, imbalance
  migrate    apply the PostgreSQL history schema
  engine-sim run a simulated SGLang engine that serves requests (no GPU), to point a reporter or router at
  version    print the version and build (also --version)

Run 'loadreporter <command> --help' for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "loadreporter:", errorText(err))
		os.Exit(1)
	}
}

// errorText is err for the operator: a domain error's message and cause,
// without the code a program would act on.
func errorText(err error) string {
	if de, ok := err.(*domain.Error); ok {
		if de.Cause != nil {
			return de.Message + ": " + de.Cause.Error()
		}
		return de.Message
	}
	return err.Error()
}

// run runs the command args name with the environment environ (a list of
// KEY=value). Help asked for (--help) goes to stdout and ends with
// flag.ErrHelp; everything else a command has to say about its flags goes
// to stderr: the top-level help when no command is known, and a warning
// per LOADREPORTER_* variable the command does not read.
func run(ctx context.Context, args []string, environ []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, help)
		return errors.New("no command given")
	}
	// Every command answers --version, as the top level does.
	if len(args) > 1 && slices.ContainsFunc(args[1:], func(a string) bool { return a == "--version" || a == "-version" }) {
		fmt.Fprintln(stdout, buildinfo.String())
		return nil
	}
	env := envflag.NewEnviron(environ)
	getenv := env.Getenv
	// Said once the flags are read, before the command runs.
	warnUnknown := func() {
		for _, w := range env.Unknown(args[0]) {
			fmt.Fprintln(stderr, "loadreporter: warning:", w)
		}
	}
	switch args[0] {
	case "serve":
		cfg, err := app.ParseServe(args[1:], getenv, stdout)
		warnUnknown()
		if err != nil {
			return err
		}
		m, err := app.InitializeMain(cfg)
		if err != nil {
			return err
		}
		return m.Run(ctx)
	case "watch":
		cfg, err := cli.ParseWatch(args[1:], getenv, stdout)
		warnUnknown()
		if err != nil {
			return err
		}
		cfg.Problems = stderr
		return cli.Watch(ctx, cfg, stdout)
	case "fleet":
		cfg, err := fleet.Parse(args[1:], getenv, stdout)
		warnUnknown()
		if err != nil {
			return err
		}
		m, err := fleet.New(cfg)
		if err != nil {
			return err
		}
		return m.Run(ctx)
	case "audit":
		cfg, err := cli.ParseAudit(args[1:], getenv, stdout)
		warnUnknown()
		if err != nil {
			return err
		}
		cfg.Notes = stderr
		return cli.Audit(ctx, cfg, stdout)
	case "migrate":
		url, err := cli.ParseMigrate(args[1:], getenv, stdout)
		warnUnknown()
		if err != nil {
			return err
		}
		return cli.Migrate(ctx, url, stdout)
	case "engine-sim":
		cfg, err := enginesim.Parse(args[1:], getenv, stdout)
		warnUnknown()
		if err != nil {
			return err
		}
		m, err := enginesim.New(cfg)
		if err != nil {
			return err
		}
		return m.Run(ctx)
	case "version", "--version":
		fmt.Fprintln(stdout, buildinfo.String())
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, help)
		return nil
	}
	fmt.Fprint(stderr, help)
	return fmt.Errorf("unknown command %q", args[0])
}
