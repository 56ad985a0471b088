// Package config is sandbox-run's one typed application configuration,
// read the same way by every command (serve, mcp, execute, worker): the
// defaults, then a YAML file, then SANDBOX_RUN_* variables, then the
// command's flags (Flags). It checks what it reads (Validate) and knows
// nothing of what uses it.
package config

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sandbox-run/sandbox-run/pkg/netpolicy"
	"github.com/sandbox-run/sandbox-run/pkg/secrets"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Config is the server's whole configuration: filled from a YAML file, then
// the environment (SANDBOX_RUN_*), then flags.
type Config struct {
	Addr      string `yaml:"addr" json:"addr"`
	DataDir   string `yaml:"data_dir" json:"data_dir"`
	Languages string `yaml:"languages" json:"languages,omitempty"`
	// ToolchainCacheDir holds the prepared toolchain caches (Go's build
	// cache), shared by every data dir that names it; empty: the host's
	// /var/cache/sandbox-run/toolchains when run by root, else
	// DataDir/cache/toolchains.
	ToolchainCacheDir string `yaml:"toolchain_cache_dir" json:"toolchain_cache_dir,omitempty"`

	// Workers run executions at once; Queue more may wait for one.
	Workers int `yaml:"workers" json:"workers"`
	Queue   int `yaml:"queue" json:"queue"`

	// Request bounds.
	MaxBodyBytes int64 `yaml:"max_body_bytes" json:"max_body_bytes"`
	// MaxResponseBytes is the response budget: the outputs of one request
	// (stdout, stderr, compile output, every test case's, output files) take
	// at most this many bytes of JSON together; past it output is cut and
	// flagged (response_truncated). A request may ask for less.
	MaxResponseBytes int64 `yaml:"max_response_bytes" json:"max_response_bytes"`
	MaxFiles         int   `yaml:"max_files" json:"max_files"`
	MaxArgs          int   `yaml:"max_args" json:"max_args"`
	MaxEnv           int   `yaml:"max_env" json:"max_env"`

	// Defaults apply to limits a request leaves out; Maximums bound what a
	// request may ask for (400 above them).
	Defaults LimitSet `yaml:"defaults" json:"defaults"`
	Maximums LimitSet `yaml:"maximums" json:"maximums"`

	ReadTimeoutSeconds   float64 `yaml:"read_timeout_seconds" json:"read_timeout_seconds"`
	IdleTimeoutSeconds   float64 `yaml:"idle_timeout_seconds" json:"idle_timeout_seconds"`
	ShutdownGraceSeconds float64 `yaml:"shutdown_grace_seconds" json:"shutdown_grace_seconds"`

	// Keys are the API keys; with none, the server only serves loopback.
	Keys []APIKey `yaml:"keys" json:"keys,omitempty"`
	// LogLevel is info or debug (debug logs code and output too).
	LogLevel string `yaml:"log_level" json:"log_level"`

	// The file store (POST /api/sandbox/files): one upload's cap (413
	// above), the store's total (507 above) and how long a file lives.
	MaxFileBytes   int64   `yaml:"max_file_bytes" json:"max_file_bytes"`
	FileQuotaBytes int64   `yaml:"file_quota_bytes" json:"file_quota_bytes"`
	FileTTLSeconds float64 `yaml:"file_ttl_seconds" json:"file_ttl_seconds"`
	// Sessions (POST /api/sandbox/sessions): the idle time after which one
	// ends (a session's ttl_seconds, at most SessionMaxTTLSeconds), its disk
	// cap and how many one key may have.
	SessionIdleSeconds   float64 `yaml:"session_idle_seconds" json:"session_idle_seconds"`
	SessionMaxTTLSeconds float64 `yaml:"session_max_ttl_seconds" json:"session_max_ttl_seconds"`
	SessionMaxBytes      int64   `yaml:"session_max_bytes" json:"session_max_bytes"`
	MaxSessionsPerKey    int     `yaml:"max_sessions_per_key" json:"max_sessions_per_key"`

	// Quotas per API key (filestore.go), beside the server's: the bytes and
	// the number of one key's stored files, and the disk of all of one
	// key's sessions; FileQuotaFiles is the number of files of all keys,
	// MaxSessions the number of sessions of all keys. Without API keys
	// every request is one tenant and the server's file quotas apply (the
	// session ones are per key already).
	FileQuotaFiles          int   `yaml:"file_quota_files" json:"file_quota_files"`
	FileQuotaBytesPerKey    int64 `yaml:"file_quota_bytes_per_key" json:"file_quota_bytes_per_key"`
	FileQuotaFilesPerKey    int   `yaml:"file_quota_files_per_key" json:"file_quota_files_per_key"`
	SessionQuotaBytesPerKey int64 `yaml:"session_quota_bytes_per_key" json:"session_quota_bytes_per_key"`
	MaxSessions             int   `yaml:"max_sessions" json:"max_sessions"`

	// Async executions (pkg/jobs): AsyncQueue jobs may wait (past it 503);
	// GET ?wait=true holds at most MaxWaitSeconds; results are kept
	// ResultTTLSeconds after they finish.
	AsyncQueue       int     `yaml:"async_queue" json:"async_queue"`
	MaxWaitSeconds   float64 `yaml:"max_wait_seconds" json:"max_wait_seconds"`
	ResultTTLSeconds float64 `yaml:"result_ttl_seconds" json:"result_ttl_seconds"`

	// Async quotas (pkg/jobs): one key may have AsyncQueuePerKey jobs
	// queued (past it 429); a stored result takes at most MaxResultBytes
	// (a larger one is cut down, flagged result_truncated); the stored
	// results of one key take at most ResultQuotaBytesPerKey, those of all
	// keys ResultQuotaBytes (a full quota refuses new jobs with 507).
	AsyncQueuePerKey       int   `yaml:"async_queue_per_key" json:"async_queue_per_key"`
	MaxResultBytes         int64 `yaml:"max_result_bytes" json:"max_result_bytes"`
	ResultQuotaBytes       int64 `yaml:"result_quota_bytes" json:"result_quota_bytes"`
	ResultQuotaBytesPerKey int64 `yaml:"result_quota_bytes_per_key" json:"result_quota_bytes_per_key"`
	// Callbacks (pkg/webhook): signed with CallbackSecret (HMAC-SHA256;
	// unsigned while it is empty), tried 1+CallbackRetries
	// times, CallbackRetryDelaySeconds apart and doubling, each attempt
	// within CallbackTimeoutSeconds. CallbackAllow lists addresses or CIDR
	// prefixes callbacks may reach although they are loopback, private,
	// link-local or otherwise internal.
	CallbackSecret            string   `yaml:"callback_secret" json:"-"`
	CallbackRetries           int      `yaml:"callback_retries" json:"callback_retries"`
	CallbackRetryDelaySeconds float64  `yaml:"callback_retry_delay_seconds" json:"callback_retry_delay_seconds"`
	CallbackTimeoutSeconds    float64  `yaml:"callback_timeout_seconds" json:"callback_timeout_seconds"`
	CallbackAllow             []string `yaml:"callback_allow" json:"callback_allow,omitempty"`

	// CompileCacheBytes caps the compile cache (successful compiles' artefacts
	// under DataDir/cache/compile-cache, least recently used evicted first):
	// 0 takes the default (512 MiB), a negative value turns the cache off.
	CompileCacheBytes int64 `yaml:"compile_cache_bytes" json:"compile_cache_bytes"`
	// CompileCacheShared lets every API key use the compile cache entries
	// of every other key; by default each key has its own (a cache hit would
	// tell one key what another compiled).
	CompileCacheShared bool `yaml:"compile_cache_shared" json:"compile_cache_shared"`

	// PoolSize is how many built sandboxes may wait idle for the next run
	// (each costs about 2 MB); Prewarm is how many the server builds for
	// each language at start, and keeps ready as runs take them.
	PoolSize int `yaml:"pool_size" json:"pool_size"`
	Prewarm  int `yaml:"prewarm" json:"prewarm"`

	// CgroupParent is where the engine makes its sandboxes' cgroups instead
	// of below its own cgroup: on cgroup v2 a directory (absolute, or
	// relative to the cgroup2 mount) whose memory, pids and cpu controllers
	// are delegated to the engine and which holds no processes; on v1 a
	// path relative to each hierarchy's root. Empty: the engine's own
	// cgroup (a systemd unit with Delegate=yes).
	CgroupParent string `yaml:"cgroup_parent" json:"cgroup_parent,omitempty"`

	// Images: OCI images as the root filesystems of runs (pkg/images).
	Images Images `yaml:"images" json:"images"`

	// Network: what runs may reach when a request asks for network access
	// (pkg/egress).
	Network Network `yaml:"network" json:"network"`

	// Secrets: each key's secrets, used by runs without entering them
	// (pkg/secrets, pkg/intercept).
	Secrets Secrets `yaml:"secrets" json:"secrets"`

	// Judge0 and Piston: the network and secrets of the runs of doors
	// whose protocols name neither (pkg/judge0, pkg/piston).
	Judge0 DoorNetwork `yaml:"judge0" json:"judge0"`
	Piston DoorNetwork `yaml:"piston" json:"piston"`

	// NATS joins a cluster (pkg/cluster): API nodes and workers share
	// work through NATS JetStream. Empty URLs: a single node.
	NATS NATS `yaml:"nats" json:"nats"`

	// Live: live sandboxes (pkg/live), which stay up between calls.
	Live Live `yaml:"live" json:"live"`

	// Isolation: the wall a run is behind when it names none.
	Isolation Isolation `yaml:"isolation" json:"isolation"`
}

// The isolation backends (ExecuteRequest.Isolation), weakest first.
const (
	IsolationNative = "native" // the engine's namespaces, cgroups and seccomp (pkg/sandbox)
	IsolationGVisor = "gvisor" // gVisor's user-space kernel as well (runsc)
)

// IsolationRank orders the isolation backends, weakest first; -1 for a
// name that is none of them ("" is native).
func IsolationRank(name string) int {
	switch name {
	case "", IsolationNative:
		return 0
	case IsolationGVisor:
		return 1
	}
	return -1
}

// Isolation chooses and sets up the isolation backends.
type Isolation struct {
	// Default is a run's isolation when neither it nor its key names one
	// [native].
	Default string `yaml:"default" json:"default,omitempty"`
	// Runsc is gVisor's runsc binary [runsc on PATH, else
	// /usr/local/bin/runsc]; Platform is gVisor's platform [systrap].
	Runsc    string `yaml:"runsc" json:"runsc,omitempty"`
	Platform string `yaml:"platform" json:"platform,omitempty"`
	// GVisorPool is how many gVisor sandboxes are kept booted ahead for
	// each kind of run once one has run [2; negative: none]; a kind that
	// ran out keeps up to four times as many for a minute.
	GVisorPool int `yaml:"gvisor_pool" json:"gvisor_pool,omitempty"`
}

// Live bounds live sandboxes. Zero values take the defaults in brackets.
type Live struct {
	// MaxPerKey live sandboxes one API key may have at once [20], MaxTotal
	// the server [200]; MaxMemoryMB bounds the sum of their memory limits
	// [0: none].
	MaxPerKey   int   `yaml:"max_per_key" json:"max_per_key"`
	MaxTotal    int   `yaml:"max_total" json:"max_total"`
	MaxMemoryMB int64 `yaml:"max_memory_mb" json:"max_memory_mb"`
	// MemoryMB is one sandbox's memory limit, over its whole life [512];
	// DiskMB the size of its home (/work, also /home/user) and of its
	// /tmp, each [256].
	MemoryMB int64 `yaml:"memory_mb" json:"memory_mb"`
	DiskMB   int64 `yaml:"disk_mb" json:"disk_mb"`
	// DefaultTimeoutSeconds is a sandbox's life when it asks for none
	// [300]; MaxTimeoutSeconds the most it may ask for [86400].
	DefaultTimeoutSeconds float64 `yaml:"default_timeout_seconds" json:"default_timeout_seconds"`
	MaxTimeoutSeconds     float64 `yaml:"max_timeout_seconds" json:"max_timeout_seconds"`
	// EndOnShutdown ends the live sandboxes when the server shuts down;
	// by default they outlive it, and the next server on the same data
	// dir takes them over (an agent with no server for 10 minutes ends
	// its sandbox).
	EndOnShutdown bool `yaml:"end_on_shutdown" json:"end_on_shutdown,omitempty"`
	// Ready is how many sandboxes are kept started, their agents
	// connected, for creates of the default kind [2 when the server
	// prepares sandboxes ahead (prewarm); negative: none].
	Ready int `yaml:"ready" json:"ready,omitempty"`
	// MaxSnapshotMB bounds what one key's snapshots of live sandboxes
	// hold together [1024].
	MaxSnapshotMB int64 `yaml:"max_snapshot_mb" json:"max_snapshot_mb,omitempty"`
	// IdlePauseSeconds pauses a sandbox once nobody has used it for that
	// long (no call to it, no output waited for, no port connection
	// open) when its create and its key say nothing [0: never].
	IdlePauseSeconds float64 `yaml:"idle_pause_seconds" json:"idle_pause_seconds,omitempty"`
	// EvictAfterSeconds writes a sandbox paused that long to disk and
	// gives its memory back: under gVisor with its memory and running
	// processes, otherwise with its files only (its processes end); any
	// call brings it back [0: never]. Whatever it says, a create past
	// max_memory_mb evicts paused sandboxes that keep their memory so.
	EvictAfterSeconds float64 `yaml:"evict_after_seconds" json:"evict_after_seconds,omitempty"`
	// Domain is the public domain of sandboxes' ports: PORT-ID.<Domain>
	// reaches port PORT of sandbox ID (E2B's getHost). Empty: the Host
	// the client sent, prefixed "sandbox." (e.g. sandbox.localhost:8080).
	Domain string `yaml:"domain" json:"domain,omitempty"`
}

// NATS says how to reach a cluster's NATS servers and what this node is.
type NATS struct {
	// URLs are NATS server URLs (nats://host:4222, tls://...).
	URLs []string `yaml:"urls" json:"urls,omitempty"`
	// Role of `serve` in a cluster: "all" (the default: it serves the API
	// and runs sandboxes as a worker too) or "api" (it runs none).
	Role string `yaml:"role" json:"role,omitempty"`
	// Name names this node's connection and prefixes its worker id (the
	// host name by default).
	Name string `yaml:"name" json:"name,omitempty"`
	// Credentials, as the NATS ecosystem has them: a user and password, a
	// token, a JWT creds file or an NKey seed file.
	User      string `yaml:"user" json:"user,omitempty"`
	Password  string `yaml:"password" json:"-"`
	Token     string `yaml:"token" json:"-"`
	CredsFile string `yaml:"creds_file" json:"creds_file,omitempty"`
	NKeyFile  string `yaml:"nkey_file" json:"nkey_file,omitempty"`
	// TLS: CAFile verifies the servers; CertFile and KeyFile are this
	// node's client certificate.
	CAFile   string `yaml:"ca_file" json:"ca_file,omitempty"`
	CertFile string `yaml:"cert_file" json:"cert_file,omitempty"`
	KeyFile  string `yaml:"key_file" json:"key_file,omitempty"`
	// Insecure lets a node use NATS servers that let anyone in without
	// credentials (who reaches them can read and forge the cluster's
	// jobs): without it a node refuses them.
	Insecure bool `yaml:"insecure" json:"insecure,omitempty"`
	// AckWaitSeconds is how long a job may go without a sign of life
	// from its worker before another worker gets it (default 30); every
	// node should say the same.
	AckWaitSeconds float64 `yaml:"ack_wait_seconds" json:"ack_wait_seconds,omitempty"`
}

// The roles of `serve` in a cluster.
const (
	RoleAll = "all"
	RoleAPI = "api"
)

// Network configures runs' network access. Allow is the most a request's
// network.allow may open (its entries must each fall within one of
// these): empty, the default, refuses every request that asks for a
// network; runs without one have none. Entries are those of a request
// (netpolicy.ParsePolicy): "pypi.org:443", "*.pythonhosted.org",
// "203.0.113.0/24:8080", "host.sandbox.internal:8000". MaxConnections
// caps a run's connections open at once (default 64); MaxBytesOut and
// MaxBytesIn what it sends and receives in all (default 1 GiB each).
type Network struct {
	Allow          []string `yaml:"allow" json:"allow,omitempty"`
	MaxConnections int      `yaml:"max_connections" json:"max_connections"`
	MaxBytesOut    int64    `yaml:"max_bytes_out" json:"max_bytes_out"`
	MaxBytesIn     int64    `yaml:"max_bytes_in" json:"max_bytes_in"`
	// ExtraCAFile is a PEM file of certificates the egress trusts, beside
	// the system's, when it verifies the servers a run's HTTPS requests go
	// to (runs with secrets, whose TLS it carries: pkg/intercept).
	ExtraCAFile string `yaml:"extra_ca_file" json:"extra_ca_file,omitempty"`
}

// Secrets configures the secret store (pkg/secrets): values are sealed
// under a server key, Key (32 bytes as hex or base64; never shown) or,
// without it, the file KeyFile [DATA_DIR/secrets.key], made with 0600 on
// first start.
type Secrets struct {
	Key     string `yaml:"key" json:"-"`
	KeyFile string `yaml:"key_file" json:"key_file,omitempty"`
}

// DoorNetwork is the network of the runs of a door whose protocol cannot
// name one, nor secrets (Judge0's, Piston's): Network is their allow-list,
// its entries as a request's network.allow (within the server's
// network.allow), and Secrets names secrets of the caller's key that
// they use (they need Network). Judge0 gives them to the submissions that
// set enable_network, Piston to every run. Empty, the default: no network.
type DoorNetwork struct {
	Network []string `yaml:"network" json:"network,omitempty"`
	Secrets []string `yaml:"secrets" json:"secrets,omitempty"`
}

// validate checks d, door's (the section's name), against the server's
// network.allow, max.
func (d DoorNetwork) validate(door string, max netpolicy.Policy) error {
	p, err := netpolicy.ParsePolicy(d.Network)
	switch {
	case err != nil:
		return fmt.Errorf("%s.network: %v", door, err)
	case !p.Empty() && max.Empty():
		return fmt.Errorf("%s.network: the server gives no network (network.allow is empty)", door)
	case !p.Empty():
		if err := p.Within(max); err != nil {
			return fmt.Errorf("%s.network: %v", door, err)
		}
	case len(d.Secrets) > 0:
		return fmt.Errorf("%s.secrets: a run uses its secrets through its network: give %s.network with their hosts", door, door)
	}
	for i, name := range d.Secrets {
		if !secrets.ValidName(name) || slices.Contains(d.Secrets[:i], name) {
			return fmt.Errorf("%s.secrets: %q is no secret's name (an environment variable's, [A-Za-z_][A-Za-z0-9_]{0,63}), or is named twice", door, name)
		}
	}
	return nil
}

// Images configures OCI images. Allow lists the image references requests
// may name (patterns: "*" stops at "/", "**" does not; a pattern without
// a tag allows every tag; see images.Policy): empty, the default, refuses
// every request that names one (images of language entries always run).
// MaxLayers, MaxConfigBytes and MaxBytes bound a pull (layers as fetched);
// MaxUnpackedBytes and MaxUnpackedEntries what an image's layers may
// unpack to in all (file content, tar entries). Zero takes the default:
// 128 layers, 1 MiB, 16 GiB, 8 GiB, 1,000,000 entries. MaxStoreBytes
// bounds DATA_DIR/images as a whole (blobs, unpacked layers, records;
// default 10 GiB): past it the least recently used images not in use are
// evicted, and fetched anew when a run names them again.
type Images struct {
	Allow              []string `yaml:"allow" json:"allow,omitempty"`
	MaxLayers          int      `yaml:"max_layers" json:"max_layers"`
	MaxConfigBytes     int64    `yaml:"max_config_bytes" json:"max_config_bytes"`
	MaxBytes           int64    `yaml:"max_bytes" json:"max_bytes"`
	MaxUnpackedBytes   int64    `yaml:"max_unpacked_bytes" json:"max_unpacked_bytes"`
	MaxUnpackedEntries int      `yaml:"max_unpacked_entries" json:"max_unpacked_entries"`
	MaxStoreBytes      int64    `yaml:"max_store_bytes" json:"max_store_bytes"`
}

// APIKey is one client's key. In a file give SHA256 (hex of the key's
// SHA-256), never the key itself; Key is for the environment.
type APIKey struct {
	ID     string   `yaml:"id" json:"id"`
	Key    string   `yaml:"key" json:"-"`
	SHA256 string   `yaml:"sha256" json:"-"`
	Scopes []string `yaml:"scopes" json:"scopes"`
	// RatePerSecond and Burst bound requests (token bucket); MaxConcurrent
	// bounds executions in flight. Zero means unlimited.
	RatePerSecond float64 `yaml:"rate_per_second" json:"rate_per_second,omitempty"`
	Burst         int     `yaml:"burst" json:"burst,omitempty"`
	MaxConcurrent int     `yaml:"max_concurrent" json:"max_concurrent,omitempty"`
	// IsolationMin is the weakest isolation the key's runs may have
	// (config.IsolationRank): a run that asks for less is refused, one
	// that names none gets this one.
	IsolationMin string `yaml:"isolation_min" json:"isolation_min,omitempty"`
	// LiveIdlePauseSeconds is the key's live sandboxes' idle pause when
	// their creates give none (over live.idle_pause_seconds; 0: that).
	LiveIdlePauseSeconds float64 `yaml:"live_idle_pause_seconds" json:"live_idle_pause_seconds,omitempty"`
}

// Scopes a key can have.
const (
	ScopeExecute = "execute"
	ScopeAdmin   = "admin"
)

// Default is the configuration before any file, variable or flag.
func Default() Config {
	return Config{
		Addr:             "127.0.0.1:8080",
		DataDir:          "/var/lib/sandbox-run",
		Workers:          2 * runtime.NumCPU(),
		Queue:            64,
		MaxBodyBytes:     32 << 20,
		MaxResponseBytes: wire.DefaultMaxResponseBytes,
		MaxFiles:         1000,
		MaxArgs:          256,
		MaxEnv:           128,
		Defaults: LimitSet{TimeoutSeconds: 30, MemoryMB: 256, Processes: 64, OutputBytes: 1 << 20,
			CompileTimeoutSeconds: 60},
		Maximums: LimitSet{TimeoutSeconds: 300, CPUTimeSeconds: 300, MemoryMB: 4096, Processes: 512,
			OutputBytes: 16 << 20, FileSizeBytes: 1 << 30, CompileTimeoutSeconds: 300},
		ReadTimeoutSeconds:   60,
		IdleTimeoutSeconds:   120,
		ShutdownGraceSeconds: 30,
		LogLevel:             "info",
		MaxFileBytes:         16 << 20,
		FileQuotaBytes:       1 << 30,
		FileTTLSeconds:       24 * 3600,
		SessionIdleSeconds:   1800,
		SessionMaxTTLSeconds: 24 * 3600,
		SessionMaxBytes:      48 << 20,
		MaxSessionsPerKey:    16,

		FileQuotaFiles:          10000,
		FileQuotaBytesPerKey:    256 << 20,
		FileQuotaFilesPerKey:    1000,
		SessionQuotaBytesPerKey: 256 << 20,
		MaxSessions:             256,

		AsyncQueue:                1000,
		MaxWaitSeconds:            30,
		ResultTTLSeconds:          24 * 60 * 60,
		AsyncQueuePerKey:          250,
		MaxResultBytes:            16 << 20,
		ResultQuotaBytes:          4 << 30,
		ResultQuotaBytesPerKey:    1 << 30,
		CallbackRetries:           5,
		CallbackRetryDelaySeconds: 1,
		CallbackTimeoutSeconds:    10,

		CompileCacheBytes: DefaultCompileCacheBytes,
		PoolSize:          4 * runtime.NumCPU(),
		Prewarm:           1,
	}
}

// Load reads a YAML file over the defaults (an empty path reads
// nothing), then applies the environment.
func Load(path string, env func(string) string) (Config, error) {
	cfg := Default()
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return cfg, err
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&cfg); err != nil {
			return cfg, fmt.Errorf("%s: %w", path, err)
		}
	}
	if err := cfg.applyEnv(env); err != nil {
		return cfg, err
	}
	return cfg, nil
}

func (c *Config) applyEnv(env func(string) string) error {
	str := func(key string, dst *string) {
		if v := env(key); v != "" {
			*dst = v
		}
	}
	num := func(key string, dst *int) error {
		if v := env(key); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			*dst = n
		}
		return nil
	}
	str("SANDBOX_RUN_ADDR", &c.Addr)
	str("SANDBOX_RUN_DATA_DIR", &c.DataDir)
	str("SANDBOX_RUN_TOOLCHAIN_CACHE_DIR", &c.ToolchainCacheDir)
	str("SANDBOX_RUN_LANGUAGES", &c.Languages)
	str("SANDBOX_RUN_LOG_LEVEL", &c.LogLevel)
	str("SANDBOX_RUN_CALLBACK_SECRET", &c.CallbackSecret)
	str("SANDBOX_RUN_CGROUP_PARENT", &c.CgroupParent)
	if v := env("SANDBOX_RUN_NATS"); v != "" {
		c.NATS.URLs = SplitURLs(v)
	}
	str("SANDBOX_RUN_NATS_ROLE", &c.NATS.Role)
	str("SANDBOX_RUN_NATS_USER", &c.NATS.User)
	str("SANDBOX_RUN_NATS_PASSWORD", &c.NATS.Password)
	str("SANDBOX_RUN_NATS_TOKEN", &c.NATS.Token)
	str("SANDBOX_RUN_NATS_CREDS", &c.NATS.CredsFile)
	str("SANDBOX_RUN_NATS_NKEY", &c.NATS.NKeyFile)
	str("SANDBOX_RUN_NATS_CA", &c.NATS.CAFile)
	str("SANDBOX_RUN_NATS_CERT", &c.NATS.CertFile)
	str("SANDBOX_RUN_NATS_KEY", &c.NATS.KeyFile)
	if v := env("SANDBOX_RUN_NATS_INSECURE"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("SANDBOX_RUN_NATS_INSECURE=%q: want true or false", v)
		}
		c.NATS.Insecure = b
	}
	str("SANDBOX_RUN_LIVE_DOMAIN", &c.Live.Domain)
	if err := num("SANDBOX_RUN_LIVE_MAX_PER_KEY", &c.Live.MaxPerKey); err != nil {
		return err
	}
	if err := num("SANDBOX_RUN_LIVE_MAX_TOTAL", &c.Live.MaxTotal); err != nil {
		return err
	}
	if err := num("SANDBOX_RUN_LIVE_READY", &c.Live.Ready); err != nil {
		return err
	}
	if v := env("SANDBOX_RUN_IMAGES_ALLOW"); v != "" {
		c.Images.Allow = strings.Split(v, ",")
	}
	if v := env("SANDBOX_RUN_NETWORK_ALLOW"); v != "" {
		c.Network.Allow = strings.Split(v, ",")
	}
	if err := num("SANDBOX_RUN_WORKERS", &c.Workers); err != nil {
		return err
	}
	if err := num("SANDBOX_RUN_QUEUE", &c.Queue); err != nil {
		return err
	}
	if err := num("SANDBOX_RUN_POOL_SIZE", &c.PoolSize); err != nil {
		return err
	}
	if err := num("SANDBOX_RUN_PREWARM", &c.Prewarm); err != nil {
		return err
	}
	if v := env("SANDBOX_RUN_MAX_RESPONSE_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("SANDBOX_RUN_MAX_RESPONSE_BYTES: %w", err)
		}
		c.MaxResponseBytes = n
	}
	if v := env("SANDBOX_RUN_COMPILE_CACHE_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("SANDBOX_RUN_COMPILE_CACHE_BYTES: %w", err)
		}
		c.CompileCacheBytes = n
	}
	if v := env("SANDBOX_RUN_COMPILE_CACHE_SHARED"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("SANDBOX_RUN_COMPILE_CACHE_SHARED: %w", err)
		}
		c.CompileCacheShared = b
	}
	for _, v := range []struct{ env, scope string }{{"SANDBOX_RUN_API_KEYS", ScopeExecute}, {"SANDBOX_RUN_ADMIN_KEYS", ScopeAdmin}} {
		keys, err := parseKeyList(env(v.env), v.scope)
		if err != nil {
			return fmt.Errorf("%s: %w", v.env, err)
		}
		c.Keys = append(c.Keys, keys...)
	}
	return nil
}

// parseKeyList reads "id=key,id2=key2" (or bare keys, named key-1, ...).
func parseKeyList(s, scope string) ([]APIKey, error) {
	var keys []APIKey
	for i, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		id, key, ok := strings.Cut(item, "=")
		if !ok {
			id, key = fmt.Sprintf("%s-key-%d", scope, i+1), item
		}
		if key == "" {
			return nil, fmt.Errorf("key %q is empty", id)
		}
		scopes := []string{ScopeExecute}
		if scope == ScopeAdmin {
			scopes = []string{ScopeExecute, ScopeAdmin}
		}
		keys = append(keys, APIKey{ID: id, Key: key, Scopes: scopes})
	}
	return keys, nil
}

// Validate checks the configuration of a server (the listen address too)
// and fills derived fields.
func (c *Config) Validate() error {
	host, port, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return fmt.Errorf("addr %q: %w", c.Addr, err)
	}
	if len(c.Keys) == 0 && !IsLoopback(host) {
		return fmt.Errorf("refusing to serve %s without API keys: bind a loopback address or configure keys (SANDBOX_RUN_API_KEYS)", c.Addr)
	}
	if err := c.ValidateLocal(); err != nil {
		return err
	}
	// A run must never reach the server's own API (as Judge0's runs could
	// reach its database).
	if p, err := strconv.ParseUint(port, 10, 16); err == nil && p != 0 {
		if allow, _ := netpolicy.ParsePolicy(c.Network.Allow); allow.AllowsHostInternal(uint16(p)) {
			return fmt.Errorf("network.allow: host.sandbox.internal:%d is this server's own port: runs would reach its API", p)
		}
	}
	return nil
}

// ValidateLocal checks the configuration of a command that listens
// nowhere (mcp on stdio, execute): everything but the address.
func (c *Config) ValidateLocal() error {
	switch c.NATS.Role {
	case "", RoleAll, RoleAPI:
	default:
		return fmt.Errorf("nats.role %q: use %q (API and worker) or %q (API only)", c.NATS.Role, RoleAll, RoleAPI)
	}
	if c.NATS.Role == RoleAPI && len(c.NATS.URLs) == 0 {
		return errors.New("role api needs a NATS cluster to send its runs to (--nats URL or SANDBOX_RUN_NATS)")
	}
	if c.NATS.AckWaitSeconds < 0 {
		return errors.New("nats.ack_wait_seconds must not be negative")
	}
	if c.Prewarm < 0 {
		return errors.New("prewarm must not be negative")
	}
	if IsolationRank(c.Isolation.Default) < 0 {
		return fmt.Errorf("isolation.default %q: use %q or %q", c.Isolation.Default, IsolationNative, IsolationGVisor)
	}
	if t := c.Live.IdlePauseSeconds; t < 0 || t > 1e9 {
		return fmt.Errorf("live.idle_pause_seconds %v: give a positive number of seconds (0: never)", t)
	}
	if t := c.Live.EvictAfterSeconds; t < 0 || t > 1e9 {
		return fmt.Errorf("live.evict_after_seconds %v: give a positive number of seconds (0: never)", t)
	}
	for _, k := range c.Keys {
		if IsolationRank(k.IsolationMin) < 0 {
			return fmt.Errorf("key %s: isolation_min %q: use %q or %q", k.ID, k.IsolationMin, IsolationNative, IsolationGVisor)
		}
		if t := k.LiveIdlePauseSeconds; t < 0 || t > 1e9 {
			return fmt.Errorf("key %s: live_idle_pause_seconds %v: give a positive number of seconds (0: the server's)", k.ID, t)
		}
	}
	if c.Workers < 1 || c.Queue < 0 {
		return errors.New("workers must be at least 1 and queue not negative")
	}
	if c.MaxBodyBytes < 1024 {
		return errors.New("max_body_bytes must be at least 1024")
	}
	if c.MaxResponseBytes < 64<<10 {
		return errors.New("max_response_bytes must be at least 65536")
	}
	im := c.Images
	if im.MaxLayers < 0 || im.MaxConfigBytes < 0 || im.MaxBytes < 0 || im.MaxUnpackedBytes < 0 || im.MaxUnpackedEntries < 0 || im.MaxStoreBytes < 0 {
		return errors.New("images: the max_ settings must not be negative")
	}
	for _, p := range im.Allow {
		if strings.TrimSpace(p) == "" {
			return errors.New("images.allow: an empty pattern")
		}
	}
	nw := c.Network
	if nw.MaxConnections < 0 || nw.MaxBytesOut < 0 || nw.MaxBytesIn < 0 {
		return errors.New("network: the max_ settings must not be negative")
	}
	allow, err := netpolicy.ParsePolicy(nw.Allow)
	if err != nil {
		return fmt.Errorf("network.allow: %v", err)
	}
	if err := c.Judge0.validate("judge0", allow); err != nil {
		return err
	}
	if err := c.Piston.validate("piston", allow); err != nil {
		return err
	}
	if f := nw.ExtraCAFile; f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("network.extra_ca_file: %v", err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(b) {
			return fmt.Errorf("network.extra_ca_file %s: no PEM certificate in it", f)
		}
	}
	if c.LogLevel != "info" && c.LogLevel != "debug" {
		return fmt.Errorf("log_level %q: use info or debug", c.LogLevel)
	}
	if err := c.validateStorage(); err != nil {
		return err
	}
	ids := map[string]bool{}
	for i := range c.Keys {
		k := &c.Keys[i]
		if k.ID == "" || ids[k.ID] {
			return fmt.Errorf("key %d: every key needs a unique id", i+1)
		}
		ids[k.ID] = true
		switch {
		case k.Key != "" && k.SHA256 == "":
			sum := sha256.Sum256([]byte(k.Key))
			k.SHA256 = hex.EncodeToString(sum[:])
		case k.SHA256 != "":
			k.SHA256 = strings.ToLower(strings.TrimPrefix(k.SHA256, "sha256:"))
			if b, err := hex.DecodeString(k.SHA256); err != nil || len(b) != sha256.Size {
				return fmt.Errorf("key %s: sha256 must be 64 hex digits", k.ID)
			}
		default:
			return fmt.Errorf("key %s: give sha256 (or key, from the environment)", k.ID)
		}
		if len(k.Scopes) == 0 {
			k.Scopes = []string{ScopeExecute}
		}
		for _, s := range k.Scopes {
			if s != ScopeExecute && s != ScopeAdmin {
				return fmt.Errorf("key %s: unknown scope %q", k.ID, s)
			}
		}
	}
	d, m := c.Defaults, c.Maximums
	for _, l := range []LimitSet{d, m} {
		// A negative default would make every request that leaves the limit
		// out fail as if the client had sent it; YAML can also say .nan/.inf.
		for _, v := range []float64{l.TimeoutSeconds, l.CPUTimeSeconds, float64(l.MemoryMB), float64(l.Processes), float64(l.OutputBytes), l.CompileTimeoutSeconds} {
			if !(v >= 0) || math.IsInf(v, 0) {
				return errors.New("limits must be finite and not negative")
			}
		}
	}
	if d.TimeoutSeconds > m.TimeoutSeconds || d.MemoryMB > m.MemoryMB || d.Processes > m.Processes ||
		d.OutputBytes > m.OutputBytes || d.CompileTimeoutSeconds > m.CompileTimeoutSeconds {
		return errors.New("a default limit is above its maximum")
	}
	if c.AsyncQueue < 0 || c.CallbackRetries < 0 {
		return errors.New("async_queue and callback_retries must not be negative")
	}
	for _, v := range []float64{c.MaxWaitSeconds, c.ResultTTLSeconds, c.CallbackRetryDelaySeconds, c.CallbackTimeoutSeconds} {
		if !(v >= 0) || math.IsInf(v, 0) {
			return errors.New("max_wait_seconds, result_ttl_seconds and the callback delays must be finite and not negative")
		}
	}
	if c.ResultTTLSeconds == 0 || c.CallbackTimeoutSeconds == 0 {
		return errors.New("result_ttl_seconds and callback_timeout_seconds must be above 0")
	}
	if c.CallbackSecret != "" && len(c.CallbackSecret) < 16 {
		return errors.New("callback_secret must be at least 16 bytes long")
	}
	if _, err := ParseAllowList(c.CallbackAllow); err != nil {
		return err
	}
	return nil
}

// IsLoopback says whether host is localhost or a loopback address.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// validateStorage checks the file store's and the sessions' settings, and
// the quotas per key (async ones included).
func (c *Config) validateStorage() error {
	switch {
	case c.MaxFileBytes < 1 || c.MaxFileBytes > wire.MaxFileBytes:
		return fmt.Errorf("max_file_bytes must be between 1 and %d (what an execution takes per file)", wire.MaxFileBytes)
	case c.FileQuotaBytes < c.MaxFileBytes:
		return errors.New("file_quota_bytes must be at least max_file_bytes")
	case !(c.FileTTLSeconds > 0) || math.IsInf(c.FileTTLSeconds, 0):
		return errors.New("file_ttl_seconds must be positive")
	case !(c.SessionIdleSeconds > 0) || math.IsInf(c.SessionIdleSeconds, 0):
		return errors.New("session_idle_seconds must be positive")
	case !(c.SessionMaxTTLSeconds >= c.SessionIdleSeconds) || math.IsInf(c.SessionMaxTTLSeconds, 0):
		return errors.New("session_max_ttl_seconds must be at least session_idle_seconds")
	case c.SessionMaxBytes < 1 || c.SessionMaxBytes > wire.MaxSessionBytes:
		return fmt.Errorf("session_max_bytes must be between 1 and %d (what the executor keeps of a session)", wire.MaxSessionBytes)
	case c.MaxSessionsPerKey < 1:
		return errors.New("max_sessions_per_key must be at least 1")
	case c.FileQuotaFiles < 1 || c.FileQuotaFilesPerKey < 1:
		return errors.New("file_quota_files and file_quota_files_per_key must be at least 1")
	case c.FileQuotaBytesPerKey < c.MaxFileBytes:
		return errors.New("file_quota_bytes_per_key must be at least max_file_bytes")
	case c.SessionQuotaBytesPerKey < 1:
		return errors.New("session_quota_bytes_per_key must be at least 1")
	case c.MaxSessions < 1:
		return errors.New("max_sessions must be at least 1")
	case c.AsyncQueuePerKey < 1:
		return errors.New("async_queue_per_key must be at least 1")
	case c.MaxResultBytes < MinResultBytes:
		return fmt.Errorf("max_result_bytes must be at least %d", MinResultBytes)
	case c.ResultQuotaBytes < c.MaxResultBytes || c.ResultQuotaBytesPerKey < c.MaxResultBytes:
		return errors.New("result_quota_bytes and result_quota_bytes_per_key must be at least max_result_bytes")
	}
	return nil
}

// MinResultBytes is the least max_result_bytes may be: room for a result's
// fields when its outputs are cut.
const MinResultBytes = 4 << 10

// ParseAllowList reads callback_allow: addresses and CIDR prefixes.
func ParseAllowList(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("callback_allow %q: not an IP address or CIDR prefix", s)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// LimitSet is a set of execution limits in the API's units.
type LimitSet = wire.LimitSet

// SplitURLs splits a comma-separated list of NATS URLs, dropping blanks.
func SplitURLs(v string) []string {
	var out []string
	for _, u := range strings.Split(v, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}
