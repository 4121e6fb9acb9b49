package rpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Enum values the API does not define are argument errors, in every
// encoding. protojson with DiscardUnknown (which we keep, so a client with
// a newer schema can still send us fields we do not know) silently drops a
// misspelled enum name — `"statuses":["REPORT_STATUS_HEALTY"]` would become
// an unfiltered query — and proto3 enums keep any number, named or not. The
// codecs therefore check requests against their descriptors: a name before
// protojson can drop it (checkJSONEnums), a number after decoding
// (checkEnums). Unknown fields stay tolerated.

// enumError names the field, the value and the values allowed.
func enumError(path string, ed protoreflect.EnumDescriptor, value any) error {
	var allowed []string
	vals := ed.Values()
	for i := range vals.Len() {
		v := vals.Get(i)
		if v.Number() == 0 && strings.HasSuffix(string(v.Name()), "_UNSPECIFIED") {
			continue // the zero value means unset; nobody asks for it by name
		}
		allowed = append(allowed, string(v.Name()))
	}
	return fmt.Errorf("%s: unknown %s %#v; allowed %s", path, ed.Name(), value, strings.Join(allowed, ", "))
}

// hasEnums caches whether a message type holds an enum field, at any depth,
// so the checks cost nothing for messages without one (RouterFrame). It is
// package-wide, like protobuf's own registry, because what it remembers is
// a fact about an immutable, process-wide descriptor, never configuration.
var hasEnums sync.Map // protoreflect.FullName → bool

func holdsEnums(md protoreflect.MessageDescriptor) bool {
	if v, ok := hasEnums.Load(md.FullName()); ok {
		return v.(bool)
	}
	v := scanEnums(md, map[protoreflect.FullName]bool{})
	hasEnums.Store(md.FullName(), v)
	return v
}

func scanEnums(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if seen[md.FullName()] || isWellKnown(md) {
		return false
	}
	seen[md.FullName()] = true
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.IsMap() {
			fd = fd.MapValue()
		}
		if fd.Enum() != nil || (fd.Message() != nil && scanEnums(fd.Message(), seen)) {
			return true
		}
	}
	return false
}

// isWellKnown reports a google.protobuf type: its JSON form is its own.
func isWellKnown(md protoreflect.MessageDescriptor) bool {
	return md.ParentFile() != nil && md.ParentFile().Package() == "google.protobuf"
}

// checkEnums returns an error for the first enum value in m its enum does
// not define.
func checkEnums(m protoreflect.Message, path string) error {
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		p := join(path, string(fd.Name()))
		switch {
		case fd.IsMap():
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				err = checkValue(fd.MapValue(), mv, fmt.Sprintf("%s[%v]", p, k.Interface()))
				return err == nil
			})
		case fd.IsList():
			for i := range v.List().Len() {
				if err = checkValue(fd, v.List().Get(i), fmt.Sprintf("%s[%d]", p, i)); err != nil {
					break
				}
			}
		default:
			err = checkValue(fd, v, p)
		}
		return err == nil
	})
	return err
}

func checkValue(fd protoreflect.FieldDescriptor, v protoreflect.Value, path string) error {
	switch {
	case fd.Enum() != nil:
		if fd.Enum().Values().ByNumber(v.Enum()) == nil {
			return enumError(path, fd.Enum(), int32(v.Enum()))
		}
	case fd.Message() != nil && !isWellKnown(fd.Message()) && holdsEnums(fd.Message()):
		return checkEnums(v.Message(), path)
	}
	return nil
}

// checkJSONEnums returns an error for the first enum name in the JSON
// object data (a message of type md) that the enum does not define.
// Anything else wrong with data is left to protojson to report.
func checkJSONEnums(data []byte, md protoreflect.MessageDescriptor) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return nil
	}
	return checkJSONMessage(v, md, "")
}

func checkJSONMessage(v any, md protoreflect.MessageDescriptor, path string) error {
	obj, ok := v.(map[string]any)
	if !ok || isWellKnown(md) || !holdsEnums(md) {
		return nil
	}
	fields := md.Fields()
	for key, val := range obj {
		fd := fields.ByJSONName(key)
		if fd == nil {
			fd = fields.ByTextName(key)
		}
		if fd == nil || val == nil {
			continue // an unknown field (tolerated) or null (unset)
		}
		p := join(path, string(fd.Name()))
		var err error
		switch {
		case fd.IsMap():
			m, _ := val.(map[string]any)
			for k, mv := range m {
				if err = checkJSONValue(fd.MapValue(), mv, fmt.Sprintf("%s[%s]", p, k)); err != nil {
					break
				}
			}
		case fd.IsList():
			l, _ := val.([]any)
			for i, e := range l {
				if err = checkJSONValue(fd, e, fmt.Sprintf("%s[%d]", p, i)); err != nil {
					break
				}
			}
		default:
			err = checkJSONValue(fd, val, p)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func checkJSONValue(fd protoreflect.FieldDescriptor, v any, path string) error {
	switch {
	case fd.Enum() != nil:
		// A number is checked once decoded; another type is protojson's
		// to refuse.
		if s, ok := v.(string); ok && fd.Enum().Values().ByName(protoreflect.Name(s)) == nil {
			return enumError(path, fd.Enum(), s)
		}
	case fd.Message() != nil:
		return checkJSONMessage(v, fd.Message(), path)
	}
	return nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
