// The conformance programs for Go: each file is a whole program, compiled
// alone by the suite. This file keeps them out of the main module (and of
// go vet ./..., which would see one package with nine mains).
module conformance.invalid/programs/go

go 1.26
