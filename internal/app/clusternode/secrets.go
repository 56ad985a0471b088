package clusternode

import (
	"context"
	"errors"
	"fmt"

	"github.com/sandbox-run/sandbox-run/pkg/cluster"
	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/secrets"
)

// errNoClusterKey is a cluster node with no secrets key.
var errNoClusterKey = errors.New("this cluster keeps no secrets: its nodes need one secrets key (the credentials `sandbox-run cluster init` writes hold it; or set the same secrets.key or secrets.key_file on every node)")

// secretStore is the cluster's secret store as this node serves it (a
// worker reads it only), or why it has none. Its key is the configured
// one (secrets.key, secrets.key_file), else the one in the node's
// credentials; it must be the cluster's (cluster.ErrSecretsKey).
func secretStore(ctx context.Context, c *cluster.Conn, cfg config.Config, worker bool) (*secrets.Store, error) {
	key := c.SecretsKey()
	if cfg.Secrets.Key != "" || cfg.Secrets.KeyFile != "" {
		k, err := secrets.LoadKey(cfg.Secrets.KeyFile, cfg.Secrets.Key)
		if err != nil {
			return nil, fmt.Errorf("the secrets' key: %w", err)
		}
		key = k
	}
	if key == nil {
		return nil, errNoClusterKey
	}
	b := c.SecretBackend(worker)
	st, err := secrets.New(b, key)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if err := c.CheckSecretsKey(ctx, b, st.KeyID()); err != nil {
		return nil, err
	}
	return st, nil
}
