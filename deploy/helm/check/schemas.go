package main

// -schemas DIR: JSON schemas for kubeconform, generated offline by
// reflection from the Go types of k8s.io/api (the structs the API server
// decodes into), since the upstream kubernetes-json-schema files are
// downloaded from the internet. One file per built-in kind with metadata,
// named as kubeconform's -schema-location template
// "DIR/{{ .ResourceKind }}{{ .KindSuffix }}.json" expects:
// deployment-apps-v1.json, service-v1.json,
// poddisruptionbudget-policy-v1.json, ...
//
// Each file stands alone (a recursive type is a "definitions" entry of the
// file). The schemas are strict, as kubeconform's "-strict" ones: every
// struct is an object of its json-tagged fields (embedded and ",inline"
// structs merged in, as encoding/json does) with additionalProperties
// false; apiVersion and kind allow only the kind's own; maps are objects
// whose additionalProperties is the value's schema; slices are arrays;
// []byte is a base64 string; pointers, slices and maps may be null
// (Kubernetes decodes null into them as nil). The types that decode
// themselves are written by hand: resource.Quantity (string or number),
// intstr.IntOrString (integer or string), metav1.Time and MicroTime
// (date-time string or null), metav1.Duration (string),
// runtime.RawExtension (any object), metav1.FieldsV1 (any object or null);
// any other type with its own UnmarshalJSON or UnmarshalText stops the
// generator rather than get a schema that may be wrong. "required" is left
// out, as are enums: the Go types do not say them (the API server's
// validation knows them).

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
)

// kubeconformLocation is the -schema-location to give kubeconform for DIR.
func kubeconformLocation(dir string) string {
	return filepath.Join(dir, "{{ .ResourceKind }}{{ .KindSuffix }}.json")
}

// schemaFile is the name kubeconform's template makes for a kind: the kind
// in lower case, then "-" and the group's first label (none for the core
// group), then "-" and the version (kubeconform's registry.schemaPath).
func schemaFile(gvk schema.GroupVersionKind) string {
	suffix := ""
	if gvk.Group != "" {
		suffix = "-" + strings.ToLower(strings.Split(gvk.Group, ".")[0])
	}
	return strings.ToLower(gvk.Kind) + suffix + "-" + strings.ToLower(gvk.Version) + ".json"
}

// mustKinds are written whatever the scheme holds: the kinds the chart
// renders (a missing one would be an error of the generator, not a
// finding of kubeconform).
var mustKinds = []schema.GroupVersionKind{
	{Group: "apps", Version: "v1", Kind: "Deployment"},
	{Group: "apps", Version: "v1", Kind: "DaemonSet"},
	{Group: "apps", Version: "v1", Kind: "StatefulSet"},
	{Version: "v1", Kind: "Service"},
	{Version: "v1", Kind: "ConfigMap"},
	{Version: "v1", Kind: "Secret"},
	{Version: "v1", Kind: "ServiceAccount"},
	{Version: "v1", Kind: "Pod"},
	{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"},
}

// writeSchemas writes a schema for every built-in kind with metadata of
// client-go's scheme (every version served, lists and options left out)
// into dir, and returns how many.
func writeSchemas(dir string) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	objType := reflect.TypeOf((*metav1.Object)(nil)).Elem()
	kinds := map[schema.GroupVersionKind]reflect.Type{}
	for gvk, t := range scheme.Scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal || strings.HasSuffix(gvk.Kind, "List") {
			continue
		}
		if reflect.PointerTo(t).Implements(objType) {
			kinds[gvk] = t
		}
	}
	for _, gvk := range mustKinds {
		if _, ok := kinds[gvk]; !ok {
			return 0, fmt.Errorf("%s is not a kind of client-go's scheme", gvk)
		}
	}
	gvks := make([]schema.GroupVersionKind, 0, len(kinds))
	for gvk := range kinds {
		gvks = append(gvks, gvk)
	}
	sort.Slice(gvks, func(i, j int) bool { return gvks[i].String() < gvks[j].String() })
	files := map[string]schema.GroupVersionKind{}
	for _, gvk := range gvks {
		name := schemaFile(gvk)
		if other, dup := files[name]; dup {
			return 0, fmt.Errorf("%s and %s would both be %s", other, gvk, name)
		}
		files[name] = gvk
		s, err := kindSchema(gvk, kinds[gvk])
		if err != nil {
			return 0, fmt.Errorf("%s: %w", gvk, err)
		}
		b, err := json.Marshal(s)
		if err != nil {
			return 0, err
		}
		if err := os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644); err != nil {
			return 0, err
		}
	}
	return len(gvks), nil
}

// obj is a JSON schema (draft 4, kubeconform's default).
type obj map[string]any

// generator builds one kind's schema, every type inlined (standalone, as
// kubeconform's usual schemas are) but the recursive ones, which are
// "definitions" of the file that "$ref" names. path holds the structs being
// built, to find the recursive ones.
type generator struct {
	path      map[reflect.Type]bool
	recursive map[reflect.Type]bool
	defs      obj
}

// errRecursive: a recursive type was found (and marked); start again.
var errRecursive = errors.New("recursive type")

func kindSchema(gvk schema.GroupVersionKind, t reflect.Type) (obj, error) {
	recursive := map[reflect.Type]bool{}
	for {
		g := &generator{path: map[reflect.Type]bool{}, recursive: recursive, defs: obj{}}
		s, err := g.kind(gvk, t)
		if errors.Is(err, errRecursive) {
			continue
		}
		return s, err
	}
}

func (g *generator) kind(gvk schema.GroupVersionKind, t reflect.Type) (obj, error) {
	s, err := g.typ(t)
	if err != nil {
		return nil, err
	}
	if len(g.defs) > 0 {
		s["definitions"] = g.defs
	}
	props := s["properties"].(obj)
	// Only this kind's apiVersion and kind (the types' fields are plain
	// strings).
	props["apiVersion"] = obj{"type": "string", "enum": []string{gvk.GroupVersion().String()}}
	props["kind"] = obj{"type": "string", "enum": []string{gvk.Kind}}
	s["$schema"] = "http://json-schema.org/draft-04/schema#"
	s["description"] = fmt.Sprintf("%s %s: generated by deploy/helm/check -schemas from the Go type %s (%s) of k8s.io/api %s",
		gvk.GroupVersion(), gvk.Kind, t, t.PkgPath(), apiVersion())
	return s, nil
}

var (
	quantityType     = reflect.TypeOf(resource.Quantity{})
	intOrStringType  = reflect.TypeOf(intstr.IntOrString{})
	timeType         = reflect.TypeOf(metav1.Time{})
	microTimeType    = reflect.TypeOf(metav1.MicroTime{})
	durationType     = reflect.TypeOf(metav1.Duration{})
	rawExtensionType = reflect.TypeOf(runtime.RawExtension{})
	fieldsV1Type     = reflect.TypeOf(metav1.FieldsV1{})
	unmarshalerType  = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
	textUnmarshaler  = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
)

// nullable adds null to the schema's types (for what decodes null as nil).
func nullable(s obj) obj {
	switch t := s["type"].(type) {
	case string:
		s["type"] = []string{t, "null"}
	case []string:
		for _, n := range t {
			if n == "null" {
				return s
			}
		}
		s["type"] = append(t[:len(t):len(t)], "null")
	}
	return s
}

// special is the schema of a type that decodes itself.
func special(t reflect.Type) (obj, bool) {
	switch t {
	case quantityType:
		// resource.ParseQuantity's syntax; a JSON number is read as its
		// text.
		return obj{"type": []string{"string", "number"}, "format": "quantity",
			"pattern": `^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$`}, true
	case intOrStringType:
		return obj{"type": []string{"integer", "string"}, "format": "int-or-string"}, true
	case timeType, microTimeType:
		// RFC 3339; null is the zero time (how an unset one is written:
		// "creationTimestamp: null").
		return obj{"type": []string{"string", "null"}, "format": "date-time"}, true
	case durationType:
		return obj{"type": "string"}, true // time.ParseDuration's syntax
	case rawExtensionType:
		return obj{"type": "object"}, true // an embedded object, any fields
	case fieldsV1Type:
		return obj{"type": []string{"object", "null"}}, true // managedFields' sets, any fields
	}
	return nil, false
}

func (g *generator) typ(t reflect.Type) (obj, error) {
	if s, ok := special(t); ok {
		return s, nil
	}
	if t.Kind() != reflect.Pointer && (t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) ||
		t.Implements(textUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler)) {
		return nil, fmt.Errorf("%s (%s) decodes itself and has no schema written for it", t, t.PkgPath())
	}
	switch t.Kind() {
	case reflect.Pointer:
		s, err := g.typ(t.Elem())
		if err != nil {
			return nil, err
		}
		if _, ref := s["$ref"]; ref {
			return obj{"anyOf": []obj{{"type": "null"}, s}}, nil
		}
		return nullable(s), nil
	case reflect.Bool:
		return obj{"type": "boolean"}, nil
	case reflect.String:
		return obj{"type": "string"}, nil
	case reflect.Int8, reflect.Int16, reflect.Int32:
		bits := t.Bits()
		return obj{"type": "integer", "format": fmt.Sprintf("int%d", bits),
			"minimum": -(int64(1) << (bits - 1)), "maximum": int64(1)<<(bits-1) - 1}, nil
	case reflect.Int, reflect.Int64:
		return obj{"type": "integer", "format": "int64"}, nil
	case reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return obj{"type": "integer", "minimum": 0, "maximum": uint64(1)<<t.Bits() - 1}, nil
	case reflect.Uint, reflect.Uint64:
		return obj{"type": "integer", "minimum": 0}, nil
	case reflect.Float32, reflect.Float64:
		return obj{"type": "number", "format": fmt.Sprintf("float%d", t.Bits())}, nil
	case reflect.Interface:
		return obj{}, nil // anything
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			// encoding/json's []byte: standard base64 (padding at the
			// end; the line breaks Go's decoder skips are allowed).
			return obj{"type": []string{"string", "null"}, "format": "byte",
				"pattern": `^[A-Za-z0-9+/\r\n]*={0,2}[\r\n]*$`}, nil
		}
		items, err := g.typ(t.Elem())
		if err != nil {
			return nil, err
		}
		return obj{"type": []string{"array", "null"}, "items": items}, nil
	case reflect.Array:
		items, err := g.typ(t.Elem())
		if err != nil {
			return nil, err
		}
		return obj{"type": "array", "items": items, "minItems": t.Len(), "maxItems": t.Len()}, nil
	case reflect.Map:
		if k := t.Key().Kind(); k != reflect.String {
			return nil, fmt.Errorf("%s: map key %s is not a string", t, k)
		}
		values, err := g.typ(t.Elem())
		if err != nil {
			return nil, err
		}
		return obj{"type": []string{"object", "null"}, "additionalProperties": values}, nil
	case reflect.Struct:
		if !g.recursive[t] {
			return g.object(t)
		}
		name := strings.ReplaceAll(t.PkgPath(), "/", ".") + "." + t.Name()
		ref := obj{"$ref": "#/definitions/" + name}
		if _, done := g.defs[name]; done {
			return ref, nil
		}
		g.defs[name] = nil // being built
		s, err := g.object(t)
		if err != nil {
			return nil, err
		}
		g.defs[name] = s
		return ref, nil
	}
	return nil, fmt.Errorf("%s: no schema for a %s", t, t.Kind())
}

// jsonField is a JSON property of a struct, found depth levels of embedding
// down (encoding/json's rules: the shallowest wins; two at the same depth
// cancel out, unless only one of them is tagged).
type jsonField struct {
	name   string
	depth  int
	tagged bool
	typ    reflect.Type
	str    bool // ",string"
}

func (g *generator) object(t reflect.Type) (obj, error) {
	if g.path[t] {
		if g.recursive[t] {
			return nil, fmt.Errorf("%s: recursive, but not made a definition", t)
		}
		g.recursive[t] = true
		return nil, errRecursive
	}
	g.path[t] = true
	defer delete(g.path, t)
	var fields []jsonField
	if err := collect(t, 0, &fields, map[reflect.Type]bool{}); err != nil {
		return nil, err
	}
	byName := map[string][]jsonField{}
	var names []string
	for _, f := range fields {
		if _, ok := byName[f.name]; !ok {
			names = append(names, f.name)
		}
		byName[f.name] = append(byName[f.name], f)
	}
	props := obj{}
	for _, n := range names {
		fs := byName[n]
		sort.SliceStable(fs, func(i, j int) bool { return fs[i].depth < fs[j].depth })
		win := fs[0]
		if len(fs) > 1 && fs[1].depth == win.depth {
			tagged := 0
			for _, f := range fs {
				if f.depth == win.depth && f.tagged {
					tagged++
					win = f
				}
			}
			if tagged != 1 {
				continue // encoding/json drops them all
			}
		}
		s, err := g.typ(win.typ)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", t.Name(), n, err)
		}
		if win.str {
			s = obj{"type": "string"} // a number or bool written as a string
		}
		props[n] = s
	}
	return obj{"type": "object", "properties": props, "additionalProperties": false}, nil
}

// collect appends the JSON fields of struct t, embedded structs included.
func collect(t reflect.Type, depth int, out *[]jsonField, seen map[reflect.Type]bool) error {
	if seen[t] {
		return nil
	}
	seen[t] = true
	defer delete(seen, t)
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := sf.Type
		if sf.Anonymous {
			et := ft
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			// encoding/json: of an unexported embedded type, only the
			// fields of an untagged struct (not a pointer to one) count.
			if !sf.IsExported() && (et.Kind() != reflect.Struct || ft.Kind() == reflect.Pointer || name != "") {
				continue
			}
			if name == "" && et.Kind() == reflect.Struct {
				if _, ok := special(et); !ok {
					if err := collect(et, depth+1, out, seen); err != nil {
						return err
					}
					continue
				}
			}
		} else if !sf.IsExported() {
			continue
		}
		tagged := name != ""
		if !tagged {
			name = sf.Name
		}
		str := false
		for _, o := range strings.Split(opts, ",") {
			if o == "string" {
				switch ft.Kind() {
				case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
					reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
					reflect.Float32, reflect.Float64, reflect.String:
					str = true
				}
			}
		}
		*out = append(*out, jsonField{name: name, depth: depth, tagged: tagged, typ: ft, str: str})
	}
	return nil
}
