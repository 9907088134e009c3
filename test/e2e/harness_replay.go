//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Replayed packets (issue 27, finding 4): an attacker on the network
// records a member's gossip packets and, once the member is down, sends
// them again with its address. No key is needed: a replayed packet
// decrypts as well as the original.
//
// Both ends use raw sockets created on a thread inside a host's namespace
// (the host's NSDialer): a raw IPPROTO_UDP socket receives a copy of every
// UDP datagram the namespace receives, and sends datagrams whose UDP header
// (source port included) the caller writes, from the namespace's address.

// maxCapture bounds the packets a capture keeps.
const maxCapture = 4096

// UDPCapture records the payloads of the UDP datagrams a host receives from
// one address and port to one port.
type UDPCapture struct {
	fd   int
	stop atomic.Bool
	done chan struct{}

	mu   sync.Mutex
	pkts [][]byte
}

// CaptureUDP starts recording, in at's namespace, the datagrams from
// from.IP:sport to port dport.
func CaptureUDP(t testing.TB, at, from *Host, sport, dport int) *UDPCapture {
	t.Helper()
	src := netip.MustParseAddr(from.IP).As4()
	c := &UDPCapture{fd: -1, done: make(chan struct{})}
	var err error
	if derr := at.dialer.do(func() { c.fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP) }); derr != nil {
		err = derr
	}
	if err != nil {
		t.Fatalf("e2e capture: raw socket in %s: %v", at.NS, err)
	}
	tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(c.fd)
		t.Fatalf("e2e capture: %v", err)
	}
	_ = unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	go func() {
		defer close(c.done)
		buf := make([]byte, 65536)
		for !c.stop.Load() {
			n, _, err := unix.Recvfrom(c.fd, buf, 0)
			if err != nil {
				continue // the timeout: look at stop
			}
			p := buf[:n]
			// IPv4 header (IHL words), then the UDP header.
			if n < 20 || p[0]>>4 != 4 {
				continue
			}
			ihl := int(p[0]&0x0f) * 4
			if ihl < 20 || n < ihl+8 || [4]byte(p[12:16]) != src {
				continue
			}
			u := p[ihl:]
			if int(binary.BigEndian.Uint16(u[0:2])) != sport || int(binary.BigEndian.Uint16(u[2:4])) != dport {
				continue
			}
			ulen := int(binary.BigEndian.Uint16(u[4:6]))
			if ulen < 8 || ulen > len(u) {
				continue
			}
			c.mu.Lock()
			if len(c.pkts) < maxCapture {
				c.pkts = append(c.pkts, append([]byte(nil), u[8:ulen]...))
			}
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() { c.Stop() })
	return c
}

// Stop ends the capture and returns the payloads recorded, in order.
func (c *UDPCapture) Stop() [][]byte {
	if !c.stop.Swap(true) {
		<-c.done
		unix.Close(c.fd)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]byte(nil), c.pkts...)
}

// Replayer sends recorded payloads again.
type Replayer struct {
	stop chan struct{}
	done chan struct{}
	sent atomic.Int64
	errs atomic.Int64
}

// ReplayUDP sends pkts, over and over, at rate per second, from from's
// namespace with source port sport to to.IP:dport, until Stop.
func ReplayUDP(t testing.TB, from, to *Host, sport, dport int, pkts [][]byte, rate float64) *Replayer {
	t.Helper()
	if len(pkts) == 0 {
		t.Fatal("e2e replay: nothing to replay")
	}
	var fd int
	var err error
	if derr := from.dialer.do(func() { fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP) }); derr != nil {
		err = derr
	}
	if err != nil {
		t.Fatalf("e2e replay: raw socket in %s: %v", from.NS, err)
	}
	dst := &unix.SockaddrInet4{Addr: netip.MustParseAddr(to.IP).As4()}
	r := &Replayer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		defer unix.Close(fd)
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		for i := 0; ; i++ {
			p := pkts[i%len(pkts)]
			// UDP header; checksum 0: none (allowed for IPv4). The
			// kernel writes the IP header with the namespace's address.
			d := make([]byte, 8+len(p))
			binary.BigEndian.PutUint16(d[0:2], uint16(sport))
			binary.BigEndian.PutUint16(d[2:4], uint16(dport))
			binary.BigEndian.PutUint16(d[4:6], uint16(len(d)))
			copy(d[8:], p)
			if err := unix.Sendto(fd, d, 0, dst); err != nil {
				r.errs.Add(1)
			} else {
				r.sent.Add(1)
			}
			select {
			case <-r.stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { r.Stop() })
	return r
}

// Stop ends the replay and returns how many datagrams were sent.
func (r *Replayer) Stop() int64 {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
	return r.sent.Load()
}

// Errors is how many sends failed.
func (r *Replayer) Errors() int64 { return r.errs.Load() }

func (r *Replayer) String() string {
	return fmt.Sprintf("%d sent, %d failed", r.sent.Load(), r.errs.Load())
}

// MetricValue reads one series (name and labels exactly as exposed, e.g.
// `shoal_member_failure_pings_total{kind="revive"}`) from the agent's
// /metrics; false when the agent does not have it.
func MetricValue(ctx context.Context, a *Agent, series string) (float64, bool, error) {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: a.Host.dialer.DialContext}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+a.HTTPAddr()+"/metrics", nil)
	if err != nil {
		return 0, false, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false, fmt.Errorf("%s's /metrics: %s", a.Name, resp.Status)
	}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 4<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil, err
		}
	}
	return 0, false, sc.Err()
}
