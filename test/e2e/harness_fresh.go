//go:build e2e

package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/shoaldb/shoal/internal/testutil/soakcheck"
)

// FreshTable is the freshness client's table: one row per write attempt,
// carrying the run, the writer, its sequence number and its client-side
// write time (microseconds since the epoch), so that rows of earlier runs
// or other writers never count.
const FreshTable = "e2e.fresh"

// FreshSchema creates FreshTable (on the primary; it replicates).
const FreshSchema = "CREATE TABLE IF NOT EXISTS " + FreshTable +
	" (run BIGINT NOT NULL, writer INT NOT NULL, seq BIGINT NOT NULL, written_at BIGINT NOT NULL, PRIMARY KEY (run, writer, seq))"

// FreshRead is one read of a FreshClient.
type FreshRead struct {
	Start, End time.Time
	ServerID   int64
	MaxSeq     int64
	Err        string
}

// FreshClient measures how fresh reads are: a writer inserts a numbered row
// through an app host's HAProxy write port every `every` and records each
// acknowledged write; a reader, through the read port, reads the newest of
// that writer's rows every `every` together with the answering server's
// server_id. One new connection per operation, as Client.
type FreshClient struct {
	run, writer int64
	every       time.Duration
	wdb, rdb    *sql.DB
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	seq         int64 // the last write's sequence number (the writer goroutine's)

	mu    sync.Mutex
	acks  []soakcheck.Ack
	reads []FreshRead
}

// StartFreshClient starts a freshness client in h's namespace, writing
// through 127.0.0.1:rwPort and reading through 127.0.0.1:roPort. run
// tells this run's rows from others', writer this client's from other
// clients'. Stop it with Stop.
func StartFreshClient(h *Host, rwPort, roPort int, run, writer int64, every time.Duration) (*FreshClient, error) {
	open := func(port int) (*sql.DB, error) { return appDB(h, port) }
	wdb, err := open(rwPort)
	if err != nil {
		return nil, err
	}
	rdb, err := open(roPort)
	if err != nil {
		wdb.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &FreshClient{run: run, writer: writer, every: every, wdb: wdb, rdb: rdb, cancel: cancel}
	c.wg.Add(2)
	go c.loop(ctx, c.write)
	go c.loop(ctx, c.read)
	return c, nil
}

// loop runs op every c.every until ctx ends.
func (c *FreshClient) loop(ctx context.Context, op func(context.Context)) {
	defer c.wg.Done()
	tick := time.NewTicker(c.every)
	defer tick.Stop()
	for {
		op(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// write inserts the next row. A failed write's sequence number is not
// reused: it may have committed all the same.
func (c *FreshClient) write(ctx context.Context) {
	c.seq++ // only this goroutine touches seq
	start := time.Now()
	qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	_, err := c.wdb.ExecContext(qctx, fmt.Sprintf("INSERT INTO %s (run, writer, seq, written_at) VALUES (%d, %d, %d, %d)",
		FreshTable, c.run, c.writer, c.seq, start.UnixMicro()))
	cancel()
	acked := time.Now()
	if err != nil || ctx.Err() != nil {
		return
	}
	c.mu.Lock()
	c.acks = append(c.acks, soakcheck.Ack{Seq: c.seq, At: acked})
	c.mu.Unlock()
}

// read reads the newest of the writer's rows the read port shows, and who
// showed it, in one statement (so on one server).
func (c *FreshClient) read(ctx context.Context) {
	r := FreshRead{Start: time.Now()}
	qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	err := c.rdb.QueryRowContext(qctx, fmt.Sprintf("SELECT @@server_id, COALESCE(MAX(seq), 0) FROM %s WHERE run = %d AND writer = %d",
		FreshTable, c.run, c.writer)).Scan(&r.ServerID, &r.MaxSeq)
	cancel()
	r.End = time.Now()
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		r.Err = err.Error()
	}
	c.mu.Lock()
	c.reads = append(c.reads, r)
	c.mu.Unlock()
}

// Stop ends the client and closes its pools. Idempotent.
func (c *FreshClient) Stop() {
	c.cancel()
	c.wg.Wait()
	c.wdb.Close()
	c.rdb.Close()
}

// Acks returns the acknowledged writes so far, by sequence number.
func (c *FreshClient) Acks() []soakcheck.Ack {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]soakcheck.Ack(nil), c.acks...)
}

// Reads returns the reads started in [from, to].
func (c *FreshClient) Reads(from, to time.Time) []FreshRead {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []FreshRead
	for _, r := range c.reads {
		if !r.Start.Before(from) && !r.Start.After(to) {
			out = append(out, r)
		}
	}
	return out
}
