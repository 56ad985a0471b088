package api

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestOpenAPIStatusAndSignalTexts: openapi.json says what results hold: a
// compile step's own status is never error_runtime, and a signal gives
// exit_code -1 with signal naming it.
func TestOpenAPIStatusAndSignalTexts(t *testing.T) {
	type prop struct {
		Enum        []string `json:"enum"`
		Description string   `json:"description"`
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]prop `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	step := doc.Components.Schemas["StepResult"].Properties
	if st := step["status"]; slices.Contains(st.Enum, "error_runtime") || !slices.Contains(st.Enum, "error_compile") ||
		!strings.Contains(st.Description, "error_compile") {
		t.Errorf("StepResult.status: %+v", st)
	}
	for _, name := range []string{"ExecuteResponse", "StepResult", "CaseResult"} {
		p := doc.Components.Schemas[name].Properties
		if !strings.Contains(p["exit_code"].Description, "-1 when a signal ended it") || !strings.Contains(p["signal"].Description, "exit_code is then -1") {
			t.Errorf("%s: exit_code %q, signal %q", name, p["exit_code"].Description, p["signal"].Description)
		}
	}
}
