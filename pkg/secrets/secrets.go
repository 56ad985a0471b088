// Package secrets keeps each API key's secrets (name, value, the hosts it
// may be sent to, and how it is presented), their values encrypted at rest
// (AES-256-GCM) under a server key: a sandboxed run names a secret and sees
// only a placeholder, and the server's network egress puts the value in
// the run's requests to the secret's hosts. Values never appear in
// plaintext in a record, in an error or in the JSON this package marshals.
//
// An owner is the API key's identity ("" on a server without keys). The
// store writes it nowhere: the file store names an owner's file by its
// SHA-256, and each sealed value is bound to its owner, name, hosts,
// header and times as additional data, so that a value moved to another
// owner or secret, or a secret's hosts rewritten, fails to open.
package secrets

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// Limits of a secret and of an owner's secrets.
const (
	KeySize    = 32       // bytes of the server key (AES-256)
	MaxSecrets = 100      // secrets per owner; past it Put fails with ErrFull
	MaxValue   = 16 << 10 // bytes of a value
	MaxHosts   = 32       // hosts of a secret
	MaxFormat  = 256      // bytes of a header format
)

// Errors of the store, for errors.Is, wrapped with the secret's name or
// the field at fault and what it allows. ErrFull (an owner holds
// MaxSecrets) is also an ErrInvalid.
var (
	ErrNotFound = errors.New("no such secret")
	ErrInvalid  = errors.New("invalid secret")
	ErrFull     = fmt.Errorf("%w: too many secrets", ErrInvalid)
)

// Secret is one secret. Its Value is never marshaled.
type Secret struct {
	Name  string `json:"name"`
	Value string `json:"-"`
	// Hosts are where the value may be sent: "api.example.com",
	// "*.example.com" (any name below example.com, not example.com itself)
	// or an IP address ("[2001:db8::1]" for IPv6), each optionally with
	// ":PORT" (every port without one); "host.sandbox.internal" is the
	// server's host (its ports a run's network lists). Put stores them in lower case, without a final
	// dot, IPv6 in brackets, duplicates dropped.
	Hosts   []string  `json:"hosts"`
	Header  *Header   `json:"header,omitempty"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// Header presents a secret as a request header, set on requests to the
// secret's hosts: Name (e.g. "Authorization") set to Format with "{value}"
// replaced by the value (e.g. "Bearer {value}"); Format "" means "{value}".
type Header struct {
	Name   string `json:"name"`
	Format string `json:"format,omitempty"`
}

// Store keeps owners' secrets in a Backend, their values sealed under the
// server key. It reads the backend on every call and keeps no plaintext
// between calls. It is safe for concurrent use.
type Store struct {
	b     Backend
	aead  cipher.AEAD
	keyID string // tells a record sealed under another key
	now   func() time.Time

	mu sync.RWMutex // Put and Delete read, change and write a record
}

// record is what Store keeps for an owner: its secrets sorted by name,
// each value sealed (nonce, then ciphertext and tag).
type record struct {
	Version int      `json:"version"`
	Key     string   `json:"key"`
	Secrets []sealed `json:"secrets"`
}

// sealed is a secret in a record, its value sealed instead.
type sealed struct {
	Secret
	Sealed []byte `json:"sealed"`
}

const version = 1

// New returns a store of the records in b, sealed under key (KeySize bytes).
func New(b Backend, key []byte) (*Store, error) {
	if b == nil {
		return nil, errors.New("secrets: no backend")
	}
	if len(key) != KeySize {
		return nil, fmt.Errorf("secrets: the key has %d bytes, want %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("sandbox-run secrets key id"))
	return &Store{b: b, aead: aead, keyID: hex.EncodeToString(mac.Sum(nil)[:8]), now: time.Now}, nil
}

// KeyID names the server key the store seals under, without revealing
// it: servers that share records must have the same.
func (s *Store) KeyID() string { return s.keyID }

// Put stores sec for owner, replacing the one of its name (whose Created
// it keeps). It returns the secret as stored, without its value. An
// invalid secret is an error wrapping ErrInvalid; a new secret past
// MaxSecrets, one wrapping ErrFull (and so ErrInvalid).
func (s *Store) Put(owner string, sec Secret) (Secret, error) {
	sec, err := check(sec)
	if err != nil {
		return Secret{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	err = s.update(owner, func(secs []Secret) ([]Secret, error) {
		sec.Created = s.now().UTC()
		sec.Updated = sec.Created
		if i, ok := find(secs, sec.Name); ok {
			sec.Created = secs[i].Created
			secs[i] = sec
		} else if len(secs) >= MaxSecrets {
			return nil, fmt.Errorf("%w: an API key holds at most %d", ErrFull, MaxSecrets)
		} else {
			secs = slices.Insert(secs, i, sec)
		}
		return secs, nil
	})
	if err != nil {
		return Secret{}, err
	}
	sec.Value = ""
	return sec, nil
}

// List returns owner's secrets sorted by name, without their values.
func (s *Store) List(owner string) ([]Secret, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	secs, err := s.open(owner)
	if err != nil {
		return nil, err
	}
	for i := range secs {
		secs[i].Value = ""
	}
	return secs, nil
}

// Get returns owner's secrets of names, with their values, in the order
// of names. A name owner has no secret of is an error wrapping
// ErrNotFound that names it.
func (s *Store) Get(owner string, names []string) ([]Secret, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	secs, err := s.open(owner)
	if err != nil {
		return nil, err
	}
	out := make([]Secret, 0, len(names))
	for _, name := range names {
		i, ok := find(secs, name)
		if !ok {
			return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
		}
		out = append(out, secs[i])
	}
	return out, nil
}

// Delete removes owner's secret name; one that does not exist is an error
// wrapping ErrNotFound.
func (s *Store) Delete(owner, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.update(owner, func(secs []Secret) ([]Secret, error) {
		i, ok := find(secs, name)
		if !ok {
			return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
		}
		return slices.Delete(secs, i, i+1), nil
	})
}

// maxConflicts is how many times update redoes a change another server
// made stale before it gives up.
const maxConflicts = 8

// update changes owner's secrets by change and saves them. On a Shared
// backend the record is saved only if no other server changed it since it
// was read; if one did, it is read again and change redone.
func (s *Store) update(owner string, change func([]Secret) ([]Secret, error)) error {
	sh, shared := s.b.(Shared)
	for try := 1; ; try++ {
		var (
			data []byte
			rev  uint64
			err  error
		)
		if shared {
			data, rev, err = sh.LoadRev(owner)
		} else {
			data, err = s.b.Load(owner)
		}
		if err != nil {
			return fmt.Errorf("secrets: load: %w", err)
		}
		secs, err := s.decode(owner, data)
		if err != nil {
			return err
		}
		if secs, err = change(secs); err != nil {
			return err
		}
		out, err := s.encode(owner, secs)
		if err != nil {
			return err
		}
		if !shared {
			return s.b.Save(owner, out)
		}
		if err = sh.SaveRev(owner, out, rev); !errors.Is(err, ErrConflict) || try == maxConflicts {
			return err
		}
	}
}

// find returns where name is, or would be, in secs sorted by name.
func find(secs []Secret, name string) (int, bool) {
	return slices.BinarySearchFunc(secs, name, func(s Secret, name string) int {
		return strings.Compare(s.Name, name)
	})
}

// open reads owner's record and opens every value: a value that does not
// authenticate fails the whole record.
func (s *Store) open(owner string) ([]Secret, error) {
	data, err := s.b.Load(owner)
	if err != nil {
		return nil, fmt.Errorf("secrets: load: %w", err)
	}
	return s.decode(owner, data)
}

// decode opens owner's record data.
func (s *Store) decode(owner string, data []byte) ([]Secret, error) {
	if len(data) == 0 {
		return nil, nil
	}
	var rec record
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return nil, fmt.Errorf("secrets: bad record: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("secrets: bad record: data after it")
	}
	if rec.Version != version {
		return nil, fmt.Errorf("secrets: record version %d, this server reads %d", rec.Version, version)
	}
	if rec.Key != s.keyID {
		return nil, errors.New("secrets: the record was sealed under another server key")
	}
	n := s.aead.NonceSize()
	secs := make([]Secret, len(rec.Secrets))
	for i, e := range rec.Secrets {
		if i > 0 && secs[i-1].Name >= e.Name {
			return nil, errors.New("secrets: bad record: names out of order")
		}
		if len(e.Sealed) < n {
			return nil, fmt.Errorf("secrets: secret %q: sealed value too short", e.Name)
		}
		v, err := s.aead.Open(nil, e.Sealed[:n], e.Sealed[n:], additional(owner, &e.Secret))
		if err != nil {
			return nil, fmt.Errorf("secrets: secret %q does not authenticate: its record was altered or moved", e.Name)
		}
		secs[i] = e.Secret
		secs[i].Value = string(v)
	}
	return secs, nil
}

// encode seals secs (sorted by name) as owner's record: nil when there
// are none (the record is removed).
func (s *Store) encode(owner string, secs []Secret) ([]byte, error) {
	if len(secs) == 0 {
		return nil, nil
	}
	rec := record{Version: version, Key: s.keyID, Secrets: make([]sealed, len(secs))}
	n := s.aead.NonceSize()
	for i, sec := range secs {
		value := sec.Value
		sec.Value = ""
		nonce := make([]byte, n, n+len(value)+s.aead.Overhead())
		rand.Read(nonce)
		rec.Secrets[i] = sealed{sec, s.aead.Seal(nonce, nonce, []byte(value), additional(owner, &sec))}
	}
	return json.Marshal(rec)
}

// additional is the data a sealed value is bound to: its owner and every
// field of its secret but the value, each length-prefixed.
func additional(owner string, sec *Secret) []byte {
	b := []byte("sandbox-run secrets v1")
	add := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	add(owner)
	add(sec.Name)
	b = binary.AppendUvarint(b, uint64(len(sec.Hosts)))
	for _, h := range sec.Hosts {
		add(h)
	}
	if sec.Header != nil {
		b = append(b, 1)
		add(sec.Header.Name)
		add(sec.Header.Format)
	} else {
		b = append(b, 0)
	}
	b = binary.AppendVarint(b, sec.Created.UnixNano())
	return binary.AppendVarint(b, sec.Updated.UnixNano())
}
