package wire

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// FileData is file content that travels in JSON as a string when it is
// UTF-8 text (that escaping does not make more than twice as large) and as
// {"content": "...", "encoding": "base64"} otherwise, so bytes are never
// mangled.
type FileData []byte

// MarshalJSON implements json.Marshaler.
// (Placeholders of WriteJSON for base64 content take the object form with
// the placeholder as content.)
func (d FileData) MarshalJSON() ([]byte, error) {
	if ph, b64 := placeholderFile(d); ph && b64 {
		return marshalText(fileObject{Content: string(d), Encoding: "base64"})
	}
	if asText(d) {
		return marshalText(string(d))
	}
	return marshalText(fileObject{Content: encodeBase64(d), Encoding: "base64"})
}

// UnmarshalJSON accepts a string or {"content", "encoding"} with encoding
// "utf-8" (or empty) or "base64".
func (d *FileData) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*d = FileData(s)
		return nil
	}
	var obj struct {
		Content  *string `json:"content"`
		Encoding string  `json:"encoding"`
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&obj); err != nil || obj.Content == nil {
		return errors.New(`a file is a string or {"content": "...", "encoding": "utf-8"|"base64"}`)
	}
	switch strings.ToLower(obj.Encoding) {
	case "", "utf-8", "utf8", "text":
		*d = FileData(*obj.Content)
	case "base64":
		raw, err := base64.StdEncoding.DecodeString(*obj.Content)
		if err != nil {
			return fmt.Errorf("invalid base64 content: %v", err)
		}
		*d = raw
	default:
		return fmt.Errorf("unknown file encoding %q (use utf-8 or base64)", obj.Encoding)
	}
	return nil
}

// OutputFiles maps a path under /work to its content.
type OutputFiles map[string]FileData

func encodeBase64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// WriteDir writes the files under dir (made if missing), their
// directories too, never outside it: a name that would leave dir (an
// absolute path, "..", a symlink on the way) is an error.
func (f OutputFiles) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	for name, data := range f {
		if d := filepath.Dir(name); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		if err := root.WriteFile(name, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
