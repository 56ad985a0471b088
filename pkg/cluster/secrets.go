package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sandbox-run/sandbox-run/pkg/secrets"
)

// The cluster's secret store. KV SR_SECRETS keeps each API key's record
// of pkg/secrets (its values sealed under the cluster's secrets key,
// which `cluster init` writes into both roles' credentials), under the hex
// SHA-256 of the key's identity, and the name of that secrets key
// (secrets.Store.KeyID) under keyCheck: a node whose key is another's
// refuses to serve secrets rather than fail on every record. API nodes
// write records (only their role may publish to $KV.SR_SECRETS); workers
// read them as a run or a live sandbox starts. A record is saved only at
// the revision it was read at (secrets.Shared), so API nodes changing one
// key's secrets at once lose neither change.

// SecretsBucket is the KV bucket of the cluster's secrets.
const SecretsBucket = "SR_SECRETS"

// keyCheck is SR_SECRETS' entry naming the secrets key.
const keyCheck = "key-check"

// secretsTimeout bounds one call of the store on NATS.
const secretsTimeout = 10 * time.Second

// SecretsKey is the cluster's secrets key: Options.SecretsKey, else the
// one this node's credentials hold (nil: none).
func (c *Conn) SecretsKey() []byte { return c.secretsKey }

// SecretBackend is the cluster's secrets.Backend, SR_SECRETS, made at its
// first use. readOnly is a worker's: it reads records and saves none.
func (c *Conn) SecretBackend(readOnly bool) secrets.Shared {
	return &secretKV{c: c, readOnly: readOnly}
}

// secretKV is SR_SECRETS as a secrets.Shared backend.
type secretKV struct {
	c        *Conn
	readOnly bool

	mu sync.Mutex
	kv jetstream.KeyValue
}

// errReadOnly is a worker saving a record.
var errReadOnly = errors.New("cluster: a worker keeps no secrets (the API nodes do)")

func (s *secretKV) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kv != nil {
		return s.kv, nil
	}
	err := retry(ctx, func(ctx context.Context) (err error) {
		s.kv, err = s.c.kvBucket(ctx, jetstream.KeyValueConfig{Bucket: SecretsBucket,
			Description: "sandbox-run: each API key's secrets, sealed", Replicas: s.c.replicas}, false)
		return err
	})
	if err != nil {
		s.kv = nil
		return nil, fmt.Errorf("cluster: bucket %s: %w", SecretsBucket, err)
	}
	return s.kv, nil
}

// WatchSecrets calls changed with the owners' keys (SecretOwnerKey) whose
// secrets change in SR_SECRETS, from now until ctx ends: a worker's live
// sandboxes then take their new values.
func (c *Conn) WatchSecrets(ctx context.Context, changed func(ownerKey string)) error {
	kv, err := (&secretKV{c: c, readOnly: true}).bucket(ctx)
	if err != nil {
		return err
	}
	w, err := kv.WatchAll(ctx, jetstream.UpdatesOnly())
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("cluster: the watch of " + SecretsBucket + " ended")
			}
			if e != nil && e.Key() != keyCheck {
				changed(e.Key())
			}
		}
	}
}

// SecretOwnerKey is owner's key in SR_SECRETS: never the owner itself.
func SecretOwnerKey(owner string) string { return ownerKey(owner) }

// ownerKey is owner's key in SR_SECRETS: never the owner itself.
func ownerKey(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(sum[:])
}

func (s *secretKV) Load(owner string) ([]byte, error) {
	data, _, err := s.LoadRev(owner)
	return data, err
}

func (s *secretKV) LoadRev(owner string) ([]byte, uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), secretsTimeout)
	defer cancel()
	kv, err := s.bucket(ctx)
	if err != nil {
		return nil, 0, err
	}
	var e jetstream.KeyValueEntry
	err = retry(ctx, func(ctx context.Context) (err error) {
		e, err = kv.Get(ctx, ownerKey(owner))
		return err
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	return e.Value(), e.Revision(), nil
}

func (s *secretKV) Save(owner string, data []byte) error {
	return s.SaveRev(owner, data, 0)
}

// SaveRev writes owner's record if SR_SECRETS holds it at rev (0: holds
// none), or deletes it for empty data.
func (s *secretKV) SaveRev(owner string, data []byte, rev uint64) error {
	if s.readOnly {
		return errReadOnly
	}
	ctx, cancel := context.WithTimeout(context.Background(), secretsTimeout)
	defer cancel()
	kv, err := s.bucket(ctx)
	if err != nil {
		return err
	}
	key := ownerKey(owner)
	if len(data) == 0 && rev == 0 {
		return nil // none, and none it was
	}
	// A write whose answer was lost and is sent again conflicts with
	// itself: the store then reads the record and redoes its change,
	// which leaves it as one write would.
	err = retry(ctx, func(ctx context.Context) (err error) {
		switch {
		case len(data) == 0:
			err = kv.Delete(ctx, key, jetstream.LastRevision(rev))
		case rev == 0:
			_, err = kv.Create(ctx, key, data)
		default:
			_, err = kv.Update(ctx, key, data, rev)
		}
		return err
	})
	if conflict(err) {
		return fmt.Errorf("%w: %v", secrets.ErrConflict, err)
	}
	return err
}

// errCodeWrongLastSequence is JetStream's "wrong last sequence": a KV
// write at a revision that is no longer the key's.
const errCodeWrongLastSequence jetstream.ErrorCode = 10071

// conflict says whether err is a write at a stale revision.
func conflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) || errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeWrongLastSequence
}

// ErrSecretsKey is a node whose secrets key is not the one the cluster's
// store was sealed under.
var ErrSecretsKey = errors.New("this node's secrets key is not the cluster's: give every node the credentials of one `sandbox-run cluster init` (or the same secrets.key / secrets.key_file)")

// CheckSecretsKey checks that keyID (secrets.Store.KeyID) names the key of
// the cluster's secrets. The first API node to check records its own; a
// worker only compares (none recorded yet passes).
func (c *Conn) CheckSecretsKey(ctx context.Context, b secrets.Backend, keyID string) error {
	s, ok := b.(*secretKV)
	if !ok {
		return errors.New("cluster: not the cluster's secret backend")
	}
	kv, err := s.bucket(ctx)
	if err != nil {
		return err
	}
	for {
		var e jetstream.KeyValueEntry
		err := retry(ctx, func(ctx context.Context) (err error) {
			e, err = kv.Get(ctx, keyCheck)
			return err
		})
		switch {
		case err == nil && string(e.Value()) == keyID:
			return nil
		case err == nil:
			return ErrSecretsKey
		case !errors.Is(err, jetstream.ErrKeyNotFound):
			return err
		case s.readOnly:
			return nil
		}
		err = retry(ctx, func(ctx context.Context) error {
			_, err := kv.Create(ctx, keyCheck, []byte(keyID))
			return err
		})
		if err != nil && !conflict(err) {
			return err
		}
		// Recorded now, by this node or another: read it again.
	}
}
