package probe

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MySQL server error numbers the probe tells apart.
const (
	erConCount        = 1040 // too many connections
	erAccessDenied    = 1045
	erServerShutdown  = 1053
	erNormalShutdown  = 1077
	erUserLimit       = 1203 // max_user_connections
	erConnectionKill  = 1927 // MariaDB: connection was killed
	erServerShutdown2 = 4031 // MySQL 8: disconnected by the server (idle timeout)
)

// verdict is what an error means for a check.
type verdict struct {
	outcome Outcome
	reason  Reason
	// lost means the connection is unusable but says nothing certain about
	// the server (it may have been killed by an operator, or timed out by
	// wait_timeout): worth one immediate reconnect.
	lost bool
}

// isTimeout reports a deadline from the context or the socket. The driver
// reports a socket read deadline as mysql.ErrInvalidConn, so that error
// counts as a timeout when the check ran out of time. The deadline itself is
// compared, not only ctx.Err(): the context's timer goroutine may not have
// run yet when the socket deadline fires.
func isTimeout(err error, ctx context.Context) bool {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return true
	case errors.As(err, &ne) && ne.Timeout():
		return true
	}
	expired := ctx.Err() != nil
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		expired = true
	}
	return expired && (errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn))
}

// classify maps an error from connecting (connecting=true) or from a check
// statement to an outcome. ctx is the check's context.
func classify(err error, ctx context.Context, connecting bool) verdict {
	var me *mysql.MySQLError
	switch {
	case isTimeout(err, ctx):
		return verdict{outcome: OutcomeFail, reason: ReasonTimeout, lost: true}
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ENOENT):
		// Nothing listens: the server is down (or the address is wrong).
		return verdict{outcome: OutcomeHardFail, reason: ReasonRefused}
	case errors.As(err, &me):
		switch me.Number {
		case erServerShutdown, erNormalShutdown:
			return verdict{outcome: OutcomeHardFail, reason: ReasonShutdown, lost: true}
		case erAccessDenied:
			return verdict{outcome: OutcomeFail, reason: ReasonAuth}
		case erConCount, erUserLimit:
			return verdict{outcome: OutcomeFail, reason: ReasonTooMany}
		case erConnectionKill, erServerShutdown2:
			return verdict{outcome: OutcomeFail, reason: ReasonConnLost, lost: true}
		}
		if connecting {
			return verdict{outcome: OutcomeFail, reason: ReasonConnect}
		}
		return verdict{outcome: OutcomeFail, reason: ReasonQuery}
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, mysql.ErrInvalidConn), errors.Is(err, driver.ErrBadConn),
		errors.Is(err, sql.ErrConnDone), errors.Is(err, net.ErrClosed):
		if connecting {
			// A fresh connection dropped during the handshake: the server
			// is going away (or refusing us); count it at once.
			return verdict{outcome: OutcomeHardFail, reason: ReasonConnLost}
		}
		return verdict{outcome: OutcomeFail, reason: ReasonConnLost, lost: true}
	}
	if connecting {
		return verdict{outcome: OutcomeFail, reason: ReasonConnect, lost: true}
	}
	return verdict{outcome: OutcomeFail, reason: ReasonQuery}
}
