package mariadbtest

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// User is an account for CreateUser.
type User struct {
	Name, Password string
	// Grants, e.g. "SLAVE MONITOR" (what shoal's probe needs); empty: none.
	Grants string
	// MaxConns caps the account's connections (MAX_USER_CONNECTIONS); 0:
	// no cap.
	MaxConns int
}

// CreateUser creates u for 127.0.0.1 and localhost, on one connection with
// binary logging off, so the account stays on this server (each server of
// a replicated set gets its own without breaking replication).
func (s *Server) CreateUser(u User) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := s.DB().Conn(ctx)
	if err != nil {
		s.t.Fatalf("mariadbtest: %s: %v", s.Addr(), err)
	}
	defer conn.Close()
	stmts := []string{"SET SESSION sql_log_bin=0"}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		create := fmt.Sprintf("CREATE USER '%s'@'%s' IDENTIFIED BY '%s'", u.Name, host, u.Password)
		if u.MaxConns > 0 {
			create += fmt.Sprintf(" WITH MAX_USER_CONNECTIONS %d", u.MaxConns)
		}
		stmts = append(stmts, create)
		if u.Grants != "" {
			stmts = append(stmts, fmt.Sprintf("GRANT %s ON *.* TO '%s'@'%s'", u.Grants, u.Name, host))
		}
	}
	stmts = append(stmts, "SET SESSION sql_log_bin=1")
	for _, q := range stmts {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			s.t.Fatalf("mariadbtest: %s: %s: %v", s.Addr(), q, err)
		}
	}
}

// StartReplicated starts a primary and n read_only replicas replicating
// from it with GTID, each with the account u (when u.Name is set), and
// waits until every replica's threads run.
func StartReplicated(t testing.TB, n int, u User) (primary *Server, replicas []*Server) {
	t.Helper()
	Require(t)
	primary = Start(t, Options{})
	for range n {
		replicas = append(replicas, Start(t, Options{ReadOnly: true}))
	}
	for _, s := range append([]*Server{primary}, replicas...) {
		if u.Name != "" {
			s.CreateUser(u)
		}
	}
	for _, r := range replicas {
		r.ReplicateFrom(primary)
	}
	for _, r := range replicas {
		r.WaitReplicating(30 * time.Second)
	}
	return primary, replicas
}
