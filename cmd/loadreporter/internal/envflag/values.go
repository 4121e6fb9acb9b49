package envflag

import (
	"flag"
	"fmt"
	"strings"
	"time"
)

// valueError is a value a flag refused, said in the operator's words.
type valueError struct {
	flag, value, want string
}

func (e *valueError) Error() string { return fmt.Sprintf("%s %q: %s", e.flag, e.value, e.want) }

// explained wraps a flag's value so that a value it refuses is said as
// what it wants ("want a duration like 500ms, 3s or 1m") instead of the
// strconv or time error ("parse error"), and remembers the error for
// Parse, since the flag package keeps only its text.
type explained struct {
	flag.Value
	name string
	last *error
}

// explainedBool keeps a boolean flag boolean (--tls, not --tls true).
type explainedBool struct{ explained }

func (explainedBool) IsBoolFlag() bool { return true }

func explain(f *flag.Flag, last *error) flag.Value {
	e := explained{f.Value, f.Name, last}
	if isBool(f.Value) {
		return explainedBool{e}
	}
	return e
}

func (e explained) Set(s string) error {
	err := e.Value.Set(s)
	if err == nil {
		return nil
	}
	want := err.Error()
	if g, ok := e.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case time.Duration:
			want = "want a duration like 500ms, 3s or 1m"
		case int, int64:
			want = "want a whole number"
		case uint, uint64:
			want = "want a whole number, 0 or more"
		case float64:
			want = "want a number"
		case bool:
			want = "want true or false"
		}
	}
	*e.last = &valueError{flag: "--" + e.name, value: s, want: want}
	return fmt.Errorf("%s", want)
}

// rephrase says the flag package's other errors with two dashes.
func rephrase(err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		return fmt.Errorf("unknown flag -%s", name)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		return fmt.Errorf("-%s needs a value", name)
	}
	return err
}

// withHint points at the command's --help.
func withHint(fs *flag.FlagSet, err error) error {
	return fmt.Errorf("%w (run 'loadreporter %s --help' for its flags)", err, fs.Name())
}
