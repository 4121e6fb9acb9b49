package envflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
)

// Prefix prefixes the environment variable of every flag.
const Prefix = "LOADREPORTER_"

// Name is the environment variable that sets flag name.
func Name(name string) string {
	return Prefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Parse applies environment variables, then args, to fs. Flags given on
// the command line win over the environment; extra maps a flag to a second
// variable it also reads (e.g. DATABASE_URL), with lower precedence.
func Parse(fs *flag.FlagSet, args []string, getenv func(string) string, extra map[string]string) error {
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		name, v := Name(f.Name), getenv(Name(f.Name))
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

// Usage prints every flag with its default and environment variable.
func Usage(fs *flag.FlagSet, w io.Writer, synopsis string, extra map[string]string) func() {
	return func() {
		fmt.Fprintf(w, "%s\n\nFlags (each also settable as %s<NAME>):\n", synopsis, Prefix)
		fs.VisitAll(func(f *flag.Flag) {
			def := f.DefValue
			if def == "" {
				def = "none"
			}
			env := Name(f.Name)
			if e := extra[f.Name]; e != "" {
				env += ", " + e
			}
			fmt.Fprintf(w, "  --%s\n        %s (default %s; env %s)\n", f.Name, f.Usage, def, env)
		})
	}
}

// RedactURL hides a password in a URL flag's value, so errors and logs
// that name it (a --database-url) do not leak it.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}
