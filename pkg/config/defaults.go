package config

// DefaultCompileCacheBytes is the compile cache's size unless configured
// (compile_cache_bytes); the executor takes it for a zero size too.
const DefaultCompileCacheBytes = 512 << 20
