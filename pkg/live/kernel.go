package live

// KernelDir is where a live sandbox has the interpreter kernels of
// interpreter sessions (pkg/executor's runners, mounted there read-only).
const KernelDir = "/opt/sandbox-run/runner"

// Kernels are how a live sandbox starts an interpreter kernel of a
// language (a code context): it reads a JSON command per line on stdin
// ({"cell", "marker"}), prints a cell's output to stdout and stderr each
// closed by the marker, and answers each cell with a line of JSON on
// descriptor 3 (see pkg/executor's kernel.py).
var Kernels = map[string][]string{
	"python":     {"python3", "-B", "-u", KernelDir + "/kernel.py"},
	"javascript": {"node", KernelDir + "/kernel.js"},
}
