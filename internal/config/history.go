package config

import "github.com/shoaldb/shoal/internal/history"

// History configures the record of pool and health transitions: an
// in-memory ring (history.size, default 1000) and, when history.file is set,
// an append-only JSON-lines file rotated by size (history.max_bytes, default
// 10 MiB, history.keep rotated files, default 3).
type History = history.Config

func validateHistory(h History) error { return h.Validate() }
