package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// EnvPrefix prefixes the environment variable of every flag.
const EnvPrefix = "LOADREPORTER_"

// EnvName is the environment variable that sets flag name.
func EnvName(name string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// parseFlags applies environment variables, then args, to fs. Flags given
// on the command line win over the environment; extra maps a flag to a
// second variable it also reads (e.g. DATABASE_URL), with lower precedence.
func parseFlags(fs *flag.FlagSet, args []string, getenv func(string) string, extra map[string]string) error {
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		name, v := EnvName(f.Name), getenv(EnvName(f.Name))
		if v == "" && extra[f.Name] != "" {
			name, v = extra[f.Name], getenv(extra[f.Name])
		}
		if v == "" {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
		}
	})
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return fs.Parse(args)
}

// usage prints every flag with its default and environment variable.
func usage(fs *flag.FlagSet, w io.Writer, synopsis string, extra map[string]string) func() {
	return func() {
		fmt.Fprintf(w, "%s\n\nFlags (each also settable as %s<NAME>):\n", synopsis, EnvPrefix)
		fs.VisitAll(func(f *flag.Flag) {
			def := f.DefValue
			if def == "" {
				def = "none"
			}
			env := EnvName(f.Name)
			if e := extra[f.Name]; e != "" {
				env += ", " + e
			}
			fmt.Fprintf(w, "  --%s\n        %s (default %s; env %s)\n", f.Name, f.Usage, def, env)
		})
	}
}
