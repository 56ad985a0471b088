//go:build !sandbox_run_nats_insecure_default

package clusternode

// insecureDefault is --nats-insecure's default: off. A build with the tag
// sandbox_run_nats_insecure_default turns it on, for checks written before
// nodes refused NATS servers without authentication (CI's run of the
// `cluster` acceptance check); never for a release.
const insecureDefault = false
