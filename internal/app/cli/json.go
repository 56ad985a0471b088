package cli

import (
	"encoding/json"
	"os"
)

// PrintJSON writes v to stdout as indented JSON: what --output-format
// json prints.
func PrintJSON(v any) {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
