//go:build sandbox_run_nats_insecure_default

package clusternode

// insecureDefault: see insecure.go.
const insecureDefault = true
