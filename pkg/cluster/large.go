package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A run's reply larger than one NATS message may be (max_payload, 1 MiB by
// default: a result with megabytes of output) goes through the object
// store SR_LARGE, which chunks it; the reply message only names it. The
// reader removes it; what no reader took expires.

// LargeBucket is the object store of large replies.
const LargeBucket = "SR_LARGE"

// replySlack is room kept in a message for the reply's own headers.
const replySlack = 16 << 10

// largeTTL is how long a large reply waits for its reader.
const largeTTL = 10 * time.Minute

func (c *Conn) largeStore(ctx context.Context) (jetstream.ObjectStore, error) {
	return c.large.get(ctx, c, jetstream.ObjectStoreConfig{Bucket: LargeBucket, Description: "sandbox-run: replies too large for one message",
		TTL: largeTTL, Storage: jetstream.FileStorage, Replicas: c.replicas})
}

// putLarge stores data, the reply of run id (sealed, bound to bind), and
// returns the small reply that names it.
func (c *Conn) putLarge(id, bind string, data []byte) ([]byte, error) {
	name, err := c.putBlob(id, c.seal(kindReply, bind, data))
	if err != nil {
		return nil, err
	}
	return json.Marshal(replyMsg{Large: name})
}

// getLarge reads, and removes, the large reply name, which must be sealed
// by a worker for bind.
func (c *Conn) getLarge(ctx context.Context, name, bind string) (replyMsg, error) {
	var r replyMsg
	data, err := c.takeBlob(ctx, name)
	if err == nil {
		var ok bool
		if data, ok = c.open(kindReply, bind, data); !ok {
			return r, errors.New("the stored result is not a worker's")
		}
		err = json.Unmarshal(data, &r)
	}
	return r, err
}

// putBlob stores data (of run or session id) in SR_LARGE and returns its
// name there.
func (c *Conn) putBlob(id string, data []byte) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs, err := c.largeStore(ctx)
	if err != nil {
		return "", fmt.Errorf("cluster: %s: %w", LargeBucket, err)
	}
	name := id + "-" + randomSuffix()
	if _, err := obs.PutBytes(ctx, name, data); err != nil {
		return "", fmt.Errorf("cluster: %s: %w", LargeBucket, err)
	}
	return name, nil
}

// takeBlob reads, and removes, blob name.
func (c *Conn) takeBlob(ctx context.Context, name string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	obs, err := c.largeStore(ctx)
	if err != nil {
		return nil, err
	}
	data, err := getBytes(ctx, obs, name)
	if err != nil {
		return nil, fmt.Errorf("cluster: %s %s: %w", LargeBucket, name, err)
	}
	_ = obs.Delete(ctx, name)
	return data, nil
}

// getBytes reads object name whole, again when it came back corrupt: an
// object read while the cluster is busy has been seen to fail its digest
// check once and read right the next time.
func getBytes(ctx context.Context, obs jetstream.ObjectStore, name string) ([]byte, error) {
	for try := 1; ; try++ {
		data, err := obs.GetBytes(ctx, name)
		if !errors.Is(err, jetstream.ErrDigestMismatch) || try == 3 {
			return data, err
		}
		sleep(ctx, time.Duration(try)*100*time.Millisecond)
	}
}
