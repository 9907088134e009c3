// Package history keeps an agent's record of pool and health transitions.
//
// A [Log] holds the newest [Config.Size] entries (default 1,000) in a ring
// in memory, for `shoal history [--node N] [--since 10m] [--format json]`
// and the HTTP API. Each [Entry] says when, which node, old → new, and why.
//
// # The ring and the file
//
// The ring lives for one run of the agent: it starts empty, Seq counts from
// 1, and it is never filled from the file. When [Config.File] is set, every
// entry is also appended to that file as one JSON object per line (JSON
// lines); the file is the durable record and survives restarts.
//
// The file is opened with O_APPEND|O_CREATE, mode 0640, and appended to
// across restarts. Writing a line costs one write(2) and no fsync, so
// [Log.Add] returns quickly; the file is fsynced when it is rotated and on
// [Log.Close]. Before a line that would make the file larger than
// [Config.MaxBytes] (default 10 MiB), the file is rotated the way logrotate
// numbers files: file.(Keep-1) → file.Keep, …, file.1 → file.2, file →
// file.1, and a fresh file is started; at most [Config.Keep] (default 3)
// rotated files are kept (numbered files beyond Keep, left by an earlier,
// larger Keep, are removed). A single line larger than MaxBytes is still
// written, alone in a fresh file.
//
// If the file is removed or renamed by someone else, the next Add notices
// and starts a new file at the configured path, so an external rotator that
// moves the file away works too.
//
// # Failures
//
// Add never returns an error. When the file cannot be written (disk full,
// directory removed), the entry stays in the ring, the error is counted in
// Stats.FileErrors and logged once per distinct message, and the next Add
// tries to open the file again. A line cut short by a failed write is
// terminated before the next one, so the file stays one object per line.
//
// Field values may come from other machines; json.Marshal escapes control
// characters, so a newline inside a node name or reason can never split a
// line.
package history
