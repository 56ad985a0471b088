package config

import (
	"flag"
	"fmt"
	"os"
)

// Flags are the configuration's command-line flags on a command's flag
// set: --config and those of the settings the command names. Load reads
// the defaults, the file, the environment and then the flags the user set.
type Flags struct {
	fs    *flag.FlagSet
	path  string
	apply map[string]func(*Config)
}

// setting is a configuration field a flag can set.
type setting struct {
	usage string
	bind  func(fs *flag.FlagSet, name, usage string) func(*Config)
}

func stringSetting(usage string, field func(*Config) *string) setting {
	return setting{usage, func(fs *flag.FlagSet, name, usage string) func(*Config) {
		v := fs.String(name, "", usage)
		return func(c *Config) { *field(c) = *v }
	}}
}

func intSetting(usage string, field func(*Config) *int) setting {
	return setting{usage, func(fs *flag.FlagSet, name, usage string) func(*Config) {
		v := fs.Int(name, 0, usage)
		return func(c *Config) { *field(c) = *v }
	}}
}

func int64Setting(usage string, field func(*Config) *int64) setting {
	return setting{usage, func(fs *flag.FlagSet, name, usage string) func(*Config) {
		v := fs.Int64(name, 0, usage)
		return func(c *Config) { *field(c) = *v }
	}}
}

// settings are the flags a command may offer, by name.
var settings = map[string]setting{
	"addr":      stringSetting("listen address (default 127.0.0.1:8080)", func(c *Config) *string { return &c.Addr }),
	"data-dir":  stringSetting("directory for sessions, jobs, files, images and caches (default /var/lib/sandbox-run)", func(c *Config) *string { return &c.DataDir }),
	"languages": stringSetting("a languages.yaml that adds or replaces entries", func(c *Config) *string { return &c.Languages }),
	"log-level": stringSetting("info or debug (debug logs code and output)", func(c *Config) *string { return &c.LogLevel }),
	"cgroup-parent": stringSetting("make the sandboxes' cgroups under this cgroup instead of this command's own (v2: a delegated cgroup with no processes, absolute or relative to the cgroup2 mount; v1: relative to each hierarchy's root)",
		func(c *Config) *string { return &c.CgroupParent }),
	"workers":   intSetting("executions run at once (default: twice the number of CPUs)", func(c *Config) *int { return &c.Workers }),
	"queue":     intSetting("executions that may wait for a worker (default 64)", func(c *Config) *int { return &c.Queue }),
	"pool-size": intSetting("built sandboxes that may wait idle for a run (default 4 per CPU; negative: none)", func(c *Config) *int { return &c.PoolSize }),
	"prewarm": intSetting("sandboxes built ahead for each language; with more than 0, toolchain caches (Go's build cache) are also prepared in the background at start (default 1)",
		func(c *Config) *int { return &c.Prewarm }),
	"nats": {"NATS server URLs, comma-separated: join a cluster (default $SANDBOX_RUN_NATS)", func(fs *flag.FlagSet, name, usage string) func(*Config) {
		v := fs.String(name, "", usage)
		return func(c *Config) { c.NATS.URLs = SplitURLs(*v) }
	}},
	"nats-creds": stringSetting("NATS credentials: the role's file from `sandbox-run cluster init` (or a NATS .creds or NKey seed file) (default $SANDBOX_RUN_NATS_CREDS)",
		func(c *Config) *string { return &c.NATS.CredsFile }),
	"nats-ca":   stringSetting("CA certificate that verifies the NATS servers (TLS)", func(c *Config) *string { return &c.NATS.CAFile }),
	"nats-cert": stringSetting("client certificate for NATS (mutual TLS)", func(c *Config) *string { return &c.NATS.CertFile }),
	"nats-key":  stringSetting("the client certificate's key", func(c *Config) *string { return &c.NATS.KeyFile }),
	"nats-insecure": {"use NATS servers that let anyone in without credentials (anyone who reaches them can read and forge jobs); without it a node refuses them", func(fs *flag.FlagSet, name, usage string) func(*Config) {
		v := fs.Bool(name, false, usage)
		return func(c *Config) { c.NATS.Insecure = *v }
	}},
	"role":                stringSetting("in a cluster: all (serve the API and run sandboxes, the default) or api (run none)", func(c *Config) *string { return &c.NATS.Role }),
	"compile-cache-bytes": int64Setting("size cap of the compile cache (default 512 MiB; negative: off)", func(c *Config) *int64 { return &c.CompileCacheBytes }),
}

// NewFlags adds --config (default $SANDBOX_RUN_CONFIG) and the named
// settings' flags to fs. It panics on a name it does not know: that is a
// programming error.
func NewFlags(fs *flag.FlagSet, names ...string) *Flags {
	f := &Flags{fs: fs, apply: make(map[string]func(*Config), len(names))}
	fs.StringVar(&f.path, "config", os.Getenv("SANDBOX_RUN_CONFIG"), "YAML configuration file")
	for _, name := range names {
		s, ok := settings[name]
		if !ok {
			panic(fmt.Sprintf("config: no flag %q", name))
		}
		f.apply[name] = s.bind(fs, name, s.usage)
	}
	return f
}

// Load reads the configuration once fs is parsed: the defaults, the file
// (--config), the environment (SANDBOX_RUN_*) and then the flags the user
// set, each over the one before. It does not validate.
func (f *Flags) Load(env func(string) string) (Config, error) {
	cfg, err := Load(f.path, env)
	if err != nil {
		return cfg, err
	}
	f.fs.Visit(func(fl *flag.Flag) {
		if apply, ok := f.apply[fl.Name]; ok {
			apply(&cfg)
		}
	})
	return cfg, nil
}
