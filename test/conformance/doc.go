// Package conformance is the language conformance suite: every available
// language/version entry of the embedded languages (languages.yaml and
// languages.d) runs the same small programs (hello, stdin, args, exit3,
// runtime_error, compile_error, files, unicode, limit) through the real
// executor. Its tests have the build tag conformance:
//
//	go test -count=1 -tags conformance -v ./test/conformance
//
// With UPDATE_LANGUAGES_DOC=1 the summary table is written to
// docs/LANGUAGES.md. The programs are in programs/<language>/, named by the
// case and the language's source extension (hello.py); a directory
// programs/<language>@<version prefix>/ (python@2.7) overrides files for
// the versions it names.
package conformance
