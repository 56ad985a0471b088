module github.com/sandbox-run/sandbox-run

go 1.26.8

require (
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
