package judge0

import "strings"

// Judge0 CE's language ids that sandbox-run can run, each mapped to a
// language of ours and, where the id names one version, the version
// prefix wanted (the installed one closest to it is used when that one is
// not installed). Ids of languages we do not have are answered 422 with
// Judge0's message, as Judge0 answers an unknown id.
type lang struct {
	ID      int
	Name    string // Judge0's name without its version
	Ours    string // our language
	Version string // a version prefix; "" for the default
}

var languages = []lang{
	{45, "Assembly (NASM)", "nasm", ""},
	{46, "Bash", "bash", ""},
	{48, "C (GCC)", "c", ""},
	{49, "C (GCC)", "c", ""},
	{50, "C (GCC)", "c", ""},
	{103, "C (GCC)", "c", ""},
	{52, "C++ (GCC)", "cpp", ""},
	{53, "C++ (GCC)", "cpp", ""},
	{54, "C++ (GCC)", "cpp", ""},
	{105, "C++ (GCC)", "cpp", ""},
	{51, "C# (Mono)", "csharp", ""},
	{55, "Common Lisp (SBCL)", "commonlisp", ""},
	{56, "D (DMD)", "d", ""},
	{57, "Elixir", "elixir", ""},
	{58, "Erlang (OTP)", "erlang", ""},
	{59, "Fortran (GFortran)", "fortran", ""},
	{60, "Go", "go", ""},
	{95, "Go", "go", ""},
	{106, "Go", "go", ""},
	{107, "Go", "go", ""},
	{61, "Haskell (GHC)", "haskell", ""},
	{62, "Java (OpenJDK)", "java", ""},
	{91, "Java (JDK)", "java", ""},
	{63, "JavaScript (Node.js)", "javascript", ""},
	{93, "JavaScript (Node.js)", "javascript", ""},
	{97, "JavaScript (Node.js)", "javascript", ""},
	{102, "JavaScript (Node.js)", "javascript", ""},
	{64, "Lua", "lua", ""},
	{65, "OCaml", "ocaml", ""},
	{67, "Pascal (FPC)", "pascal", ""},
	{68, "PHP", "php", ""},
	{98, "PHP", "php", ""},
	{69, "Prolog (GNU Prolog)", "prolog", ""},
	{70, "Python", "python", "2"},
	{71, "Python", "python", "3"},
	{92, "Python", "python", "3.11"},
	{100, "Python", "python", "3.12"},
	{109, "Python", "python", "3.13"},
	{72, "Ruby", "ruby", ""},
	{73, "Rust", "rust", ""},
	{108, "Rust", "rust", ""},
	{74, "TypeScript", "typescript", ""},
	{94, "TypeScript", "typescript", ""},
	{101, "TypeScript", "typescript", ""},
	{78, "Kotlin", "kotlin", ""},
	{80, "R", "r", ""},
	{99, "R", "r", ""},
	{81, "Scala", "scala", ""},
	{82, "SQL (SQLite)", "sqlite", ""},
	{83, "Swift", "swift", ""},
	{85, "Perl", "perl", ""},
	{86, "Clojure", "clojure", ""},
	{88, "Groovy", "groovy", ""},
	{90, "Dart", "dart", ""},
}

// statuses are Judge0's, by id.
var statuses = []Status{
	{1, "In Queue"}, {2, "Processing"}, {3, "Accepted"}, {4, "Wrong Answer"}, {5, "Time Limit Exceeded"},
	{6, "Compilation Error"}, {7, "Runtime Error (SIGSEGV)"}, {8, "Runtime Error (SIGXFSZ)"},
	{9, "Runtime Error (SIGFPE)"}, {10, "Runtime Error (SIGABRT)"}, {11, "Runtime Error (NZEC)"},
	{12, "Runtime Error (Other)"}, {13, "Internal Error"}, {14, "Exec Format Error"},
}

func status(id int) Status { return statuses[id-1] }

// nameOf is l's name as Judge0 writes it, with the version that runs:
// "C (GCC 12.2.0)", "Bash (5.2.15)".
func nameOf(l lang, version string) string {
	if strings.HasSuffix(l.Name, ")") {
		return l.Name[:len(l.Name)-1] + " " + version + ")"
	}
	return l.Name + " (" + version + ")"
}
