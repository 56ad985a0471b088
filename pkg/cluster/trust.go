package cluster

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/sandbox-run/sandbox-run/pkg/secrets"
)

// Trust between the nodes of a cluster, independent of what NATS lets a
// connection do: API nodes sign the jobs they submit (and the session
// calls and stdin they send, and the tunnels they open), workers sign the
// replies, events and presence entries they publish, both sign the
// entries of SR_JOBS and every frame of a tunnel (tunnel.go). A
// message is sealed with its kind and what it is bound to (a job's id, a
// reply's job id and stream sequence), so that a message signed for one
// job is no answer to another. A node that has keys (Keys, from a
// credentials file `sandbox-run cluster init` wrote) drops what is not
// sealed by a key of the role that may send it, and counts it (Drops). A
// node without keys (a cluster set up without `cluster init`) seals
// nothing and checks nothing.
//
// A sealed message is one line of header and the payload:
//
//	sr1.<key id>.<bind, base64url>.<signature, base64url>\n<payload>
//
// The signature is Ed25519 over "sandbox-run/1", kind, bind and payload,
// each followed by a zero byte.

// Roles of the nodes that sign.
const (
	RoleAPI    = "api"
	RoleWorker = "worker"
)

// The kinds of sealed messages, and which roles may send each.
const (
	kindJob      = "job"      // a job or a session run (API)
	kindCall     = "call"     // a session operation sent to a worker (API)
	kindStdin    = "stdin"    // a chunk of an interactive run's stdin (API)
	kindReply    = "reply"    // a run's result (worker)
	kindEvent    = "event"    // a run's event (worker)
	kindPresence = "presence" // an entry of SR_WORKERS (worker, or an API node's own)
	kindEntry    = "entry"    // an entry of SR_JOBS (API or worker)

	kindTunnel       = "tunnel"       // the open of a tunnel to a worker (API)
	kindTunnelAPI    = "tunnelapi"    // a tunnel's frame to its worker (API)
	kindTunnelWorker = "tunnelworker" // a tunnel's frame to its API node, the answer to its open first (worker)
	kindLive         = "live"         // an entry of SR_LIVE (worker)
	kindSnapshot     = "snapshot"     // a snapshot's record in SR_SNAPSHOTS (worker)
)

var senders = map[string][]string{
	kindJob: {RoleAPI}, kindCall: {RoleAPI}, kindStdin: {RoleAPI},
	kindReply: {RoleWorker}, kindEvent: {RoleWorker},
	kindPresence: {RoleWorker, RoleAPI}, kindEntry: {RoleAPI, RoleWorker},
	kindTunnel: {RoleAPI}, kindTunnelAPI: {RoleAPI}, kindTunnelWorker: {RoleWorker},
	kindLive: {RoleWorker}, kindSnapshot: {RoleWorker},
}

// Keys are a node's signing key and the public keys it trusts, by role.
type Keys struct {
	Role    string
	private ed25519.PrivateKey
	trusted map[string][]ed25519.PublicKey // by role
	secrets []byte                         // the cluster's secrets key (nil: none)
}

// NewKeys is the keys of a node of role that signs with seed (an NKey seed)
// and trusts pubs (NKey public keys) by role.
func NewKeys(role, seed string, pubs map[string][]string) (*Keys, error) {
	if role != RoleAPI && role != RoleWorker {
		return nil, fmt.Errorf("cluster: signing role %q: want %q or %q", role, RoleAPI, RoleWorker)
	}
	_, raw, err := nkeys.DecodeSeed([]byte(seed))
	if err != nil {
		return nil, fmt.Errorf("cluster: signing key: %w", err)
	}
	k := &Keys{Role: role, private: ed25519.NewKeyFromSeed(raw), trusted: map[string][]ed25519.PublicKey{}}
	for r, list := range pubs {
		for _, p := range list {
			raw, err := nkeys.Decode(nkeys.PrefixByteUser, []byte(p))
			if err != nil || len(raw) != ed25519.PublicKeySize {
				return nil, fmt.Errorf("cluster: the %s public key %q: not an NKey user key", r, p)
			}
			k.trusted[r] = append(k.trusted[r], ed25519.PublicKey(raw))
		}
	}
	if len(k.trusted[RoleAPI]) == 0 || len(k.trusted[RoleWorker]) == 0 {
		return nil, errors.New("cluster: the credentials name no public key of the API nodes or of the workers")
	}
	return k, nil
}

// keyID names a public key in a sealed message's header.
func keyID(pub ed25519.PublicKey) string { return hex.EncodeToString(pub[:4]) }

const sealMagic = "sr1."

func signed(kind, bind string, payload []byte) []byte {
	b := make([]byte, 0, len(payload)+len(kind)+len(bind)+20)
	b = append(b, "sandbox-run/1\x00"...)
	b = append(b, kind...)
	b = append(b, 0)
	b = append(b, bind...)
	b = append(b, 0)
	return append(b, payload...)
}

// Seal signs payload as a message of kind bound to bind; without keys it
// is payload itself.
func (k *Keys) Seal(kind, bind string, payload []byte) []byte {
	if k == nil {
		return payload
	}
	sig := ed25519.Sign(k.private, signed(kind, bind, payload))
	pub := k.private.Public().(ed25519.PublicKey)
	head := sealMagic + keyID(pub) + "." + base64.RawURLEncoding.EncodeToString([]byte(bind)) + "." +
		base64.RawURLEncoding.EncodeToString(sig) + "\n"
	return append([]byte(head), payload...)
}

// Reasons a message is dropped.
const (
	DropForged   = "forged"   // not sealed, or not by a key of a role that may send it
	DropReplayed = "replayed" // sealed for another job, sequence or time
)

// dropError is why Open refused a message.
type dropError struct{ reason, why string }

func (e *dropError) Error() string { return e.reason + ": " + e.why }

// Open checks data, a message of kind that must be bound to bind, and
// returns its payload. Without keys, a sealed message's payload is taken
// unchecked and anything else as it is.
func (k *Keys) Open(kind, bind string, data []byte) ([]byte, error) {
	if k == nil {
		if _, payload, ok := splitSealed(data); ok {
			return payload, nil
		}
		return data, nil
	}
	head, payload, ok := splitSealed(data)
	if !ok {
		return nil, &dropError{DropForged, "not signed"}
	}
	parts := strings.Split(head, ".")
	if len(parts) != 4 {
		return nil, &dropError{DropForged, "a malformed signature"}
	}
	gotBind, err1 := base64.RawURLEncoding.DecodeString(parts[2])
	sig, err2 := base64.RawURLEncoding.DecodeString(parts[3])
	if err1 != nil || err2 != nil {
		return nil, &dropError{DropForged, "a malformed signature"}
	}
	for _, role := range senders[kind] {
		for _, pub := range k.trusted[role] {
			if keyID(pub) != parts[1] || !ed25519.Verify(pub, signed(kind, string(gotBind), payload), sig) {
				continue
			}
			if string(gotBind) != bind {
				return nil, &dropError{DropReplayed, fmt.Sprintf("signed for %q, not %q", gotBind, bind)}
			}
			return payload, nil
		}
	}
	return nil, &dropError{DropForged, "no trusted " + strings.Join(senders[kind], " or ") + " key signed it as a " + kind}
}

func splitSealed(data []byte) (head string, payload []byte, ok bool) {
	if !bytes.HasPrefix(data, []byte(sealMagic)) {
		return "", nil, false
	}
	i := bytes.IndexByte(data, '\n')
	if i < 0 || i > 256 {
		return "", nil, false
	}
	return string(data[:i]), data[i+1:], true
}

// Drops counts the messages a node dropped, by kind and reason.
type Drops struct {
	mu sync.Mutex
	n  map[[2]string]*atomic.Uint64
}

func (d *Drops) add(kind, reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == nil {
		d.n = map[[2]string]*atomic.Uint64{}
	}
	c := d.n[[2]string{kind, reason}]
	if c == nil {
		c = new(atomic.Uint64)
		d.n[[2]string{kind, reason}] = c
	}
	c.Add(1)
}

// Counts is every (kind, reason) a node may drop with how many it did.
func (d *Drops) Counts() map[[2]string]uint64 {
	out := map[[2]string]uint64{}
	for kind := range senders {
		for _, r := range []string{DropForged, DropReplayed} {
			out[[2]string{kind, r}] = 0
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, c := range d.n {
		out[k] = c.Load()
	}
	return out
}

// open is Keys.Open on c's keys, counting and logging what it drops.
func (c *Conn) open(kind, bind string, data []byte) ([]byte, bool) {
	payload, err := c.keys.Open(kind, bind, data)
	if err != nil {
		reason := DropForged
		if de, ok := err.(*dropError); ok {
			reason = de.reason
		}
		c.drops.add(kind, reason)
		c.dropLog(kind, bind, err)
		return nil, false
	}
	return payload, true
}

// dropLog logs a dropped message, at most once a second.
func (c *Conn) dropLog(kind, bind string, err error) {
	now := time.Now().UnixNano()
	last := c.lastDropLog.Load()
	if now-last < int64(time.Second) || !c.lastDropLog.CompareAndSwap(last, now) {
		return
	}
	c.log.Warn("cluster: a message was dropped", "kind", kind, "for", bind, "why", err.Error())
}

// seal is Keys.Seal on c's keys.
func (c *Conn) seal(kind, bind string, payload []byte) []byte {
	return c.keys.Seal(kind, bind, payload)
}

// Drops is what this node dropped: messages not signed by a node of the
// cluster, or signed for something else.
func (c *Conn) Drops() map[[2]string]uint64 { return c.drops.Counts() }

// Signing says whether this node signs and checks the cluster's messages.
func (c *Conn) Signing() bool { return c.keys != nil }

// newNonce is a random nonce for a job.
func newNonce() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// replayCache remembers the nonces of the jobs a worker took, with the
// stream sequence each came at, for as long as a job may be delivered: a
// job that comes again at another sequence (published again) is a replay;
// at the same sequence it is a redelivery.
type replayCache struct {
	mu   sync.Mutex
	seen map[string]replaySeen
}

type replaySeen struct {
	seq   uint64
	until time.Time
}

const replayCacheMax = 200000

// check records nonce at seq until until, and says whether it is a replay.
func (r *replayCache) check(nonce string, seq uint64, until time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if r.seen == nil {
		r.seen = map[string]replaySeen{}
	}
	if s, ok := r.seen[nonce]; ok && now.Before(s.until) {
		return seq == 0 || s.seq != seq // sent straight: never twice
	}
	if len(r.seen) >= replayCacheMax {
		for k, s := range r.seen {
			if !now.Before(s.until) {
				delete(r.seen, k)
			}
		}
	}
	r.seen[nonce] = replaySeen{seq: seq, until: until}
	return false
}

// Credentials are what a credentials file of `sandbox-run cluster init`
// (or a NATS .creds file) holds: how to log in to NATS, and the node's
// signing keys.
type Credentials struct {
	// JWT and Seed log in to NATS: a user JWT with its NKey seed, or an
	// NKey seed alone (an NKey user of the servers' configuration).
	JWT, Seed string
	// Keys sign and check the cluster's messages (nil: the file has none).
	Keys *Keys
	// SecretsKey seals the cluster's secrets (pkg/secrets; nil: none).
	SecretsKey []byte
}

var (
	credsBlock = regexp.MustCompile(`(?s)-{3,}BEGIN ([A-Z0-9 -]+?)-{3,}\s*\n(.*?)\n\s*-{3,}END`)
	peerLine   = regexp.MustCompile(`(?m)^\s*(api|worker)\s*:\s*(U[A-Z2-7]{55})\s*$`)
)

// Credentials' blocks.
const (
	blockJWT      = "NATS USER JWT"
	blockSeed     = "USER NKEY SEED"
	blockSigning  = "SANDBOX RUN SIGNING KEY"
	blockPeerKeys = "SANDBOX RUN PUBLIC KEYS"
	blockSecrets  = "SANDBOX RUN SECRETS KEY"
)

// ReadCredentials reads a credentials file.
func ReadCredentials(path string) (*Credentials, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster: credentials: %w", err)
	}
	cr := &Credentials{}
	var signing, role, peers string
	for _, m := range credsBlock.FindAllSubmatch(data, -1) {
		kind, body := strings.TrimSpace(string(m[1])), strings.TrimSpace(string(m[2]))
		switch {
		case kind == blockJWT:
			cr.JWT = body
		case kind == blockSeed:
			cr.Seed = body
		case strings.HasPrefix(kind, blockSigning):
			signing, role = body, strings.ToLower(strings.TrimSpace(strings.TrimPrefix(kind, blockSigning)))
		case kind == blockPeerKeys:
			peers = body
		case kind == blockSecrets:
			key, err := base64.StdEncoding.DecodeString(body)
			if err != nil || len(key) != secrets.KeySize {
				return nil, fmt.Errorf("cluster: credentials %s: the secrets key is not %d bytes in base64", path, secrets.KeySize)
			}
			cr.SecretsKey = key
		}
	}
	if cr.Seed == "" && cr.JWT == "" {
		// A bare NKey seed file.
		if s := strings.TrimSpace(string(data)); strings.HasPrefix(s, "SU") && !strings.ContainsAny(s, " \n") {
			cr.Seed = s
		}
	}
	if cr.Seed == "" {
		return nil, fmt.Errorf("cluster: credentials %s: no NKey seed in it", path)
	}
	if signing != "" {
		pubs := map[string][]string{}
		for _, m := range peerLine.FindAllStringSubmatch(peers, -1) {
			pubs[m[1]] = append(pubs[m[1]], m[2])
		}
		if cr.Keys, err = NewKeys(role, signing, pubs); err != nil {
			return nil, fmt.Errorf("credentials %s: %w", path, err)
		}
		cr.Keys.secrets = cr.SecretsKey
	}
	return cr, nil
}

// FormatCredentials writes credentials of role: its NATS NKey seed, its
// signing seed, the public signing keys of both roles and, unless nil,
// the cluster's secrets key (secrets.KeySize bytes, the same in every
// role's credentials).
func FormatCredentials(role, natsSeed, signingSeed, apiPub, workerPub string, secretsKey []byte) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# sandbox-run cluster credentials of the %s role, written by `sandbox-run cluster init`.\n", role)
	b.WriteString("# Secret: keep it mode 0600, on the nodes of this role only. It logs in to NATS (the NKey\n")
	b.WriteString("# seed) and signs this role's messages; the public keys check the other role's; the secrets\n")
	b.WriteString("# key, when there, seals the cluster's secrets (the same in both roles' credentials).\n\n")
	fmt.Fprintf(&b, "-----BEGIN %s-----\n%s\n------END %s------\n\n", blockSeed, natsSeed, blockSeed)
	fmt.Fprintf(&b, "-----BEGIN %s %s-----\n%s\n------END %s %s------\n\n", blockSigning, strings.ToUpper(role), signingSeed, blockSigning, strings.ToUpper(role))
	fmt.Fprintf(&b, "-----BEGIN %s-----\napi: %s\nworker: %s\n------END %s------\n", blockPeerKeys, apiPub, workerPub, blockPeerKeys)
	if secretsKey != nil {
		fmt.Fprintf(&b, "\n-----BEGIN %s-----\n%s\n------END %s------\n", blockSecrets, base64.StdEncoding.EncodeToString(secretsKey), blockSecrets)
	}
	return []byte(b.String())
}

// NewSeed makes an NKey user key pair: its seed and public key.
func NewSeed() (seed, pub string, err error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return "", "", err
	}
	s, err := kp.Seed()
	if err != nil {
		return "", "", err
	}
	pub, err = kp.PublicKey()
	return string(s), pub, err
}
