package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/app"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/buildinfo"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/cli"
)

const help = `Usage: loadreporter <command> [flags]

Commands:
  serve   serve load reports (Monitor, health, metrics) on one port
  watch   dial a worker as a router and print its reports live
  audit   query the recorded history: reports, outages, rank-stats, gaps, imbalance
  migrate apply the PostgreSQL history schema
  version print the version and build (also --version)

Run 'loadreporter <command> --help' for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "loadreporter:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, help)
		return errors.New("no command given")
	}
	switch args[0] {
	case "serve":
		cfg, err := app.ParseServe(args[1:], getenv, stderr)
		if err != nil {
			return err
		}
		m, err := app.InitializeMain(cfg)
		if err != nil {
			return err
		}
		return m.Run(ctx)
	case "watch":
		cfg, err := cli.ParseWatch(args[1:], getenv, stderr)
		if err != nil {
			return err
		}
		return cli.Watch(ctx, cfg, stdout)
	case "audit":
		cfg, err := cli.ParseAudit(args[1:], getenv, stderr)
		if err != nil {
			return err
		}
		return cli.Audit(ctx, cfg, stdout)
	case "migrate":
		url, err := cli.ParseMigrate(args[1:], getenv, stderr)
		if err != nil {
			return err
		}
		return cli.Migrate(ctx, url, stdout)
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
