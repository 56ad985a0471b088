package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// CheckKeys reports the first object key of the JSON document data that
// is not exactly, byte for byte (after unescaping), the JSON name of a
// field where it stands in v's type: encoding/json matches keys to fields
// case-insensitively, so that a decoder with DisallowUnknownFields still
// takes {"Timeout_Seconds": 1} as timeout_seconds. Call it after data
// decoded into v without error; its answer is then nil or an
// *UnknownFieldError.
//
// It walks the document alongside v's type (v is a value or a pointer to
// one) the way encoding/json does: a field's name is its json tag's
// ("-" hides it) or else its Go name; the fields of embedded structs
// (pointers too) are promoted, with Go's rules of which name wins; a map
// takes any key; slices and arrays check each element; pointers their
// element. A type that decodes itself (json.Unmarshaler) is not looked
// into, except the types of this package whose JSON keys are known
// (ExecuteRequest, FileData, also where {"file_id": "..."} stands for
// content): their keys are checked too. Values of another JSON kind than
// the type's (a string where a struct is) are not looked into.
//
// CheckKeys does not otherwise validate data: it expects a document that
// encoding/json accepted, and for any other input it answers an error or
// nil, never panics.
func CheckKeys(data []byte, v any) error {
	t := reflect.TypeOf(v)
	if t == nil {
		return nil
	}
	c := keyChecker{data: data}
	if err := c.value(infoOf(t)); err != nil {
		if e, ok := err.(*UnknownFieldError); ok {
			e.setPath()
		}
		return err
	}
	c.skipSpace()
	if c.pos != len(c.data) {
		return c.syntax("data after the JSON value")
	}
	return nil
}

// UnknownFieldError is a key that names no field, as CheckKeys reports
// it: unknown field "Timeout_Seconds" (did you mean "timeout_seconds"?).
type UnknownFieldError struct {
	// Key is the key as sent (unescaped).
	Key string
	// Path is where the object stands in the document ("" at the top,
	// network, files["a.txt"], test_cases[0]).
	Path string
	// Suggestion is the field's name when Key names one but in other
	// letter cases; else "".
	Suggestion string

	segs []string // of Path, innermost first, while being made
}

func (e *UnknownFieldError) Error() string {
	msg := fmt.Sprintf("unknown field %q", shorten(e.Key))
	if e.Path != "" {
		msg += " in " + e.Path
	}
	if e.Suggestion != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", e.Suggestion)
	}
	return msg
}

// within puts the error inside a member or element of the object or
// array at its path: seg is `name`, `["key"]` or `[0]` (the innermost
// first; CheckKeys makes Path of them).
func (e *UnknownFieldError) within(seg string) {
	e.segs = append(e.segs, seg)
}

// maxSegs is how many of a path's steps Path shows at most.
const maxSegs = 16

// setPath makes Path of segs: the outermost and innermost steps when
// there are many.
func (e *UnknownFieldError) setPath() {
	var b strings.Builder
	n := len(e.segs)
	for i := n - 1; i >= 0; i-- {
		if n > maxSegs && i == n-maxSegs/2-1 {
			b.WriteString("...")
			i = maxSegs/2 - 1
		} else if b.Len() > 0 && e.segs[i][0] != '[' {
			b.WriteByte('.')
		}
		b.WriteString(e.segs[i])
	}
	e.Path, e.segs = b.String(), nil
}

// maxShown is about how many bytes of a key an error shows.
const maxShown = 100

// shorten cuts s to about maxShown bytes, on a character boundary.
func shorten(s string) string {
	if len(s) <= maxShown {
		return s
	}
	n := maxShown
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// maxNesting is encoding/json's limit of nested arrays and objects.
const maxNesting = 10000

// The kinds of JSON a type has keys in.
const (
	anyKeys    = iota // nothing checked beneath
	structKeys        // an object of known names
	mapKeys           // an object of any names
	listKeys          // an array
)

// keyInfo is what CheckKeys knows of a type: its fields' names and types
// when it is a struct, its element's when a map, slice or array.
type keyInfo struct {
	kind   int
	fields map[string]*keyInfo
	names  []string // of fields, sorted (for suggestions)
	elem   *keyInfo
}

var skipInfo = &keyInfo{kind: anyKeys}

// keyShapes are the types of this package that decode themselves but
// whose JSON keys are known, and a type of the same keys (encoding/json's
// rules).
var keyShapes = map[reflect.Type]reflect.Type{
	reflect.TypeFor[ExecuteRequest](): reflect.TypeFor[executeRequestKeys](),
	reflect.TypeFor[FileData]():       reflect.TypeFor[fileObjectKeys](),
}

// executeRequestKeys are ExecuteRequest's keys as its UnmarshalJSON
// reads them: its fields', where code and files' values may also be
// {"file_id": "..."}.
type executeRequestKeys struct {
	executeRequestFields
	Code  fileRefKeys              `json:"code"`
	Files map[string]fileOrRefKeys `json:"files"`
}

// executeRequestFields has ExecuteRequest's fields, not its methods.
type executeRequestFields ExecuteRequest

// fileRefKeys is a stored file's reference: {"file_id": "..."}.
type fileRefKeys struct {
	FileID string `json:"file_id"`
}

// fileObjectKeys is FileData's object form.
type fileObjectKeys struct {
	Content  string `json:"content"`
	Encoding string `json:"encoding"`
}

// fileOrRefKeys is a file of a request: FileData or a reference.
type fileOrRefKeys struct {
	fileObjectKeys
	fileRefKeys
}

var (
	keyInfoMu    sync.Mutex
	keyInfoCache sync.Map // reflect.Type -> *keyInfo, complete
	keyInfoBuilt = map[reflect.Type]*keyInfo{}
)

// infoOf is t's keyInfo, from the cache or built (once) with the types
// it reaches.
func infoOf(t reflect.Type) *keyInfo {
	if ki, ok := keyInfoCache.Load(t); ok {
		return ki.(*keyInfo)
	}
	keyInfoMu.Lock()
	defer keyInfoMu.Unlock()
	ki := buildInfo(t)
	keyInfoCache.Store(t, ki)
	return ki
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// buildInfo builds t's keyInfo under keyInfoMu; keyInfoBuilt ends
// recursion (a type's entry is there before its fields are).
func buildInfo(t reflect.Type) *keyInfo {
	// Pointers decode as their element (whose pointer is what a
	// json.Unmarshaler would be, checked below).
	for n := 0; t.Kind() == reflect.Pointer; n++ {
		if n == 8 {
			return skipInfo
		}
		t = t.Elem()
	}
	if ki, ok := keyInfoBuilt[t]; ok {
		return ki
	}
	ki := &keyInfo{}
	keyInfoBuilt[t] = ki
	if shape, ok := keyShapes[t]; ok {
		*ki = *buildInfo(shape) // complete: a shape does not reach its type
		return ki
	}
	if t.Kind() != reflect.Interface && reflect.PointerTo(t).Implements(unmarshalerType) {
		return ki // decodes itself: anyKeys
	}
	switch t.Kind() {
	case reflect.Struct:
		ki.kind = structKeys
		ki.fields = map[string]*keyInfo{}
		for _, f := range jsonFields(t) {
			ki.fields[f.name] = buildInfo(f.typ)
			ki.names = append(ki.names, f.name)
		}
		sort.Strings(ki.names)
	case reflect.Map:
		ki.kind = mapKeys
		ki.elem = buildInfo(t.Elem())
	case reflect.Slice, reflect.Array:
		ki.kind = listKeys
		ki.elem = buildInfo(t.Elem())
	}
	return ki
}

// jsonField is a field as encoding/json names it.
type jsonField struct {
	name   string
	tagged bool
	index  []int
	typ    reflect.Type
}

// jsonFields are the fields encoding/json decodes an object of t into:
// encoding/json's typeFields, names and types only.
func jsonFields(t reflect.Type) []jsonField {
	var current, next []jsonField
	next = []jsonField{{typ: t}}
	var count, nextCount map[reflect.Type]int
	visited := map[reflect.Type]bool{}
	var fields []jsonField
	for len(next) > 0 {
		current, next = next, current[:0]
		count, nextCount = nextCount, map[reflect.Type]int{}
		for _, f := range current {
			if visited[f.typ] {
				continue
			}
			visited[f.typ] = true
			for i := range f.typ.NumField() {
				sf := f.typ.Field(i)
				if sf.Anonymous {
					t := sf.Type
					if t.Kind() == reflect.Pointer {
						t = t.Elem()
					}
					if !sf.IsExported() && t.Kind() != reflect.Struct {
						continue // unexported non-struct embedded: ignored
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				if !validTag(name) {
					name = ""
				}
				index := append(f.index[:len(f.index):len(f.index)], i)
				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if name != "" || !sf.Anonymous || ft.Kind() != reflect.Struct {
					tagged := name != ""
					if name == "" {
						name = sf.Name
					}
					fields = append(fields, jsonField{name: name, tagged: tagged, index: index, typ: sf.Type})
					if count[f.typ] > 1 {
						// Several embeddings of one type at one depth
						// annihilate each other's fields, as below.
						fields = append(fields, fields[len(fields)-1])
					}
					continue
				}
				nextCount[ft]++
				if nextCount[ft] == 1 {
					next = append(next, jsonField{name: ft.Name(), index: index, typ: ft})
				}
			}
		}
	}
	sort.Slice(fields, func(i, j int) bool {
		x, y := fields[i], fields[j]
		if x.name != y.name {
			return x.name < y.name
		}
		if len(x.index) != len(y.index) {
			return len(x.index) < len(y.index)
		}
		if x.tagged != y.tagged {
			return x.tagged
		}
		for k, xik := range x.index {
			if k >= len(y.index) {
				return false
			}
			if xik != y.index[k] {
				return xik < y.index[k]
			}
		}
		return len(x.index) < len(y.index)
	})
	// Of the fields of a name, the shallowest wins, a tagged one among
	// several as shallow; otherwise none does.
	out := fields[:0]
	for advance, i := 0, 0; i < len(fields); i += advance {
		fi := fields[i]
		for advance = 1; i+advance < len(fields); advance++ {
			if fields[i+advance].name != fi.name {
				break
			}
		}
		if advance == 1 || len(fields[i+1].index) > len(fi.index) || fi.tagged != fields[i+1].tagged {
			out = append(out, fi)
		}
	}
	return out
}

// validTag is encoding/json's isValidTag.
func validTag(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

// keyChecker walks a document.
type keyChecker struct {
	data  []byte
	pos   int
	depth int
}

func (c *keyChecker) syntax(what string) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", c.pos, what)
}

func (c *keyChecker) skipSpace() {
	for c.pos < len(c.data) {
		switch c.data[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

// value checks the value at c.pos against ki.
func (c *keyChecker) value(ki *keyInfo) error {
	c.skipSpace()
	if c.pos >= len(c.data) {
		return c.syntax("unexpected end")
	}
	switch c.data[c.pos] {
	case '{':
		if ki.kind == structKeys || ki.kind == mapKeys {
			return c.object(ki)
		}
	case '[':
		if ki.kind == listKeys {
			return c.array(ki)
		}
	case '"':
		_, err := c.str()
		return err
	}
	return c.skip()
}

// enter passes the '{' or '[' at c.pos, one level deeper.
func (c *keyChecker) enter() error {
	if c.depth++; c.depth > maxNesting {
		return c.syntax("exceeded max depth")
	}
	c.pos++
	return nil
}

// object checks the members of the object at c.pos.
func (c *keyChecker) object(ki *keyInfo) error {
	if err := c.enter(); err != nil {
		return err
	}
	c.skipSpace()
	if c.pos < len(c.data) && c.data[c.pos] == '}' {
		c.pos++
		c.depth--
		return nil
	}
	for {
		c.skipSpace()
		if c.pos >= len(c.data) || c.data[c.pos] != '"' {
			return c.syntax("want a key")
		}
		key, err := c.str()
		if err != nil {
			return err
		}
		elem := ki.elem
		if ki.kind == structKeys {
			if bytes.IndexByte(key, '\\') >= 0 {
				key = unescape(key)
			}
			var ok bool
			if elem, ok = ki.fields[string(key)]; !ok {
				return unknownField(string(key), ki)
			}
		}
		c.skipSpace()
		if c.pos >= len(c.data) || c.data[c.pos] != ':' {
			return c.syntax("want ':'")
		}
		c.pos++
		if err := c.value(elem); err != nil {
			if e, ok := err.(*UnknownFieldError); ok {
				if ki.kind == mapKeys {
					e.within("[" + strconv.Quote(shorten(string(unescape(key)))) + "]")
				} else {
					e.within(string(key))
				}
			}
			return err
		}
		if done, err := c.after('}'); done || err != nil {
			return err
		}
	}
}

// after passes what follows a member or an element: ',' (more come) or
// close (the object or array ends: done).
func (c *keyChecker) after(close byte) (done bool, err error) {
	c.skipSpace()
	if c.pos >= len(c.data) {
		return false, c.syntax("unexpected end")
	}
	switch c.data[c.pos] {
	case ',':
		c.pos++
		return false, nil
	case close:
		c.pos++
		c.depth--
		return true, nil
	}
	return false, c.syntax("want ',' or '" + string(close) + "'")
}

// array checks the elements of the array at c.pos.
func (c *keyChecker) array(ki *keyInfo) error {
	if err := c.enter(); err != nil {
		return err
	}
	c.skipSpace()
	if c.pos < len(c.data) && c.data[c.pos] == ']' {
		c.pos++
		c.depth--
		return nil
	}
	for i := 0; ; i++ {
		if err := c.value(ki.elem); err != nil {
			if e, ok := err.(*UnknownFieldError); ok {
				e.within("[" + strconv.Itoa(i) + "]")
			}
			return err
		}
		if done, err := c.after(']'); done || err != nil {
			return err
		}
	}
}

// str passes the string at c.pos and returns its raw content.
func (c *keyChecker) str() ([]byte, error) {
	start := c.pos + 1
	for i := start; ; {
		j := bytes.IndexByte(c.data[i:], '"')
		if j < 0 {
			c.pos = len(c.data)
			return nil, c.syntax("unterminated string")
		}
		i += j
		// Escaped when an odd number of backslashes precede it.
		k := i
		for k > start && c.data[k-1] == '\\' {
			k--
		}
		if (i-k)%2 == 0 {
			c.pos = i + 1
			return c.data[start:i], nil
		}
		i++
	}
}

// skip passes the value at c.pos without looking into it.
func (c *keyChecker) skip() error {
	depth := 0
	for {
		c.skipSpace()
		if c.pos >= len(c.data) {
			return c.syntax("unexpected end")
		}
		switch c.data[c.pos] {
		case '"':
			if _, err := c.str(); err != nil {
				return err
			}
		case '{', '[':
			if c.depth+depth >= maxNesting {
				return c.syntax("exceeded max depth")
			}
			depth++
			c.pos++
		case '}', ']':
			if depth == 0 {
				return c.syntax("unexpected '" + string(c.data[c.pos]) + "'")
			}
			depth--
			c.pos++
		case ',', ':':
			if depth == 0 {
				return c.syntax("unexpected '" + string(c.data[c.pos]) + "'")
			}
			c.pos++
			continue
		default:
			start := c.pos
			for c.pos < len(c.data) && !delimiter(c.data[c.pos]) {
				c.pos++
			}
			if c.pos == start {
				return c.syntax("unexpected byte")
			}
		}
		if depth == 0 {
			return nil
		}
	}
}

// delimiter ends a literal (a number, true, false or null).
func delimiter(b byte) bool {
	switch b {
	case ' ', '\t', '\r', '\n', ',', ':', '[', ']', '{', '}', '"':
		return true
	}
	return false
}

// unescape is a string's content as JSON means it (raw: between the
// quotes).
func unescape(raw []byte) []byte {
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw
	}
	var s string
	quoted := make([]byte, 0, len(raw)+2)
	quoted = append(append(append(quoted, '"'), raw...), '"')
	if json.Unmarshal(quoted, &s) != nil {
		return raw
	}
	return []byte(s)
}

// unknownField is the error of key in an object of ki's fields, with the
// name it matches in other letter cases if any (as encoding/json would
// have matched it).
func unknownField(key string, ki *keyInfo) *UnknownFieldError {
	e := &UnknownFieldError{Key: key}
	for _, name := range ki.names {
		if strings.EqualFold(key, name) {
			e.Suggestion = name
			break
		}
	}
	return e
}
