//go:build e2e

package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Packet delay without netem (this kernel has none): an iptables NFQUEUE
// rule hands every packet leaving a host's eth0 to a netlink socket of the
// test process (created inside the host's namespace), which holds it for
// the delay and then accepts it. Constant delay, FIFO order. The rule uses
// --queue-bypass and the queue fails open, so a dead or overloaded delayer
// lets packets through rather than dropping them.

// nfnetlink_queue protocol constants (linux/netfilter/nfnetlink_queue.h).
const (
	nfnlSubsysQueue      = 3
	nfqnlMsgPacket       = 0
	nfqnlMsgVerdict      = 1
	nfqnlMsgConfig       = 2
	nfqaPacketHdr        = 1
	nfqaVerdictHdr       = 2
	nfqaCfgCmd           = 1
	nfqaCfgParams        = 2
	nfqaCfgQueueMaxlen   = 3
	nfqaCfgMask          = 4
	nfqaCfgFlags         = 5
	nfqnlCfgCmdBind      = 1
	nfqnlCopyMeta        = 1
	nfqaCfgFFailOpen     = 1
	nfAccept             = 1
	delayQueueNum        = 0 // queues are per network namespace
	delayQueueMaxLen     = 16384
	delayPendingCapacity = 65536
)

// Delayer delays the packets a host sends.
type Delayer struct {
	host  *Host
	delay time.Duration
	fd    int

	pending chan held
	stop    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once

	seq      atomic.Uint32
	Packets  atomic.Int64 // packets delayed
	Failures atomic.Int64 // verdicts that could not be sent
}

type held struct {
	id  uint32
	due time.Time
}

// StartDelay delays every packet leaving h's eth0 by d.
func (h *Host) StartDelay(d time.Duration) (*Delayer, error) {
	dl := &Delayer{host: h, delay: d, fd: -1, pending: make(chan held, delayPendingCapacity), stop: make(chan struct{})}
	var err error
	if e := h.dialer.do(func() {
		dl.fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	}); e != nil {
		return nil, e
	}
	if err != nil {
		return nil, fmt.Errorf("nfqueue socket in %s: %w", h.NS, err)
	}
	if err := dl.setup(); err != nil {
		unix.Close(dl.fd)
		return nil, fmt.Errorf("nfqueue in %s: %w", h.NS, err)
	}
	dl.wg.Add(2)
	go dl.receive()
	go dl.release()
	if err := h.IPTables("-A", "OUTPUT", "-o", "eth0", "-j", "NFQUEUE", "--queue-num", fmt.Sprint(delayQueueNum), "--queue-bypass"); err != nil {
		dl.Stop()
		return nil, err
	}
	return dl, nil
}

func (dl *Delayer) setup() error {
	if err := unix.Bind(dl.fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	_ = unix.SetsockoptInt(dl.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	// A receive timeout lets the receiver notice Stop.
	tv := unix.NsecToTimeval((200 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(dl.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return err
	}
	cmd := []byte{nfqnlCfgCmdBind, 0, 0, 0}
	binary.BigEndian.PutUint16(cmd[2:], unix.AF_INET)
	params := make([]byte, 5)
	binary.BigEndian.PutUint32(params, 0)
	params[4] = nfqnlCopyMeta
	u32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	for _, attrs := range [][]nlAttr{
		{{nfqaCfgCmd, cmd}},
		{{nfqaCfgParams, params}, {nfqaCfgQueueMaxlen, u32(delayQueueMaxLen)},
			{nfqaCfgMask, u32(nfqaCfgFFailOpen)}, {nfqaCfgFlags, u32(nfqaCfgFFailOpen)}},
	} {
		if err := dl.request(nfqnlMsgConfig, attrs); err != nil {
			return err
		}
	}
	return nil
}

type nlAttr struct {
	typ  uint16
	data []byte
}

// message builds an nfnetlink queue message.
func (dl *Delayer) message(msgType uint16, flags uint16, attrs []nlAttr) []byte {
	b := make([]byte, unix.NLMSG_HDRLEN, 64)
	// nfgenmsg: family, version, res_id (the queue number, big endian)
	b = append(b, unix.AF_UNSPEC, 0)
	b = binary.BigEndian.AppendUint16(b, delayQueueNum)
	for _, a := range attrs {
		l := 4 + len(a.data)
		b = binary.NativeEndian.AppendUint16(b, uint16(l))
		b = binary.NativeEndian.AppendUint16(b, a.typ)
		b = append(b, a.data...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
	}
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], nfnlSubsysQueue<<8|msgType)
	binary.NativeEndian.PutUint16(b[6:], flags)
	binary.NativeEndian.PutUint32(b[8:], dl.seq.Add(1))
	return b
}

// request sends a config message and waits for its acknowledgement.
func (dl *Delayer) request(msgType uint16, attrs []nlAttr) error {
	msg := dl.message(msgType, unix.NLM_F_REQUEST|unix.NLM_F_ACK, attrs)
	seq := binary.NativeEndian.Uint32(msg[8:])
	if err := unix.Sendto(dl.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 8192)
	for {
		n, _, err := unix.Recvfrom(dl.fd, buf, 0)
		if err != nil {
			return fmt.Errorf("wait for ack: %w", err)
		}
		msgs, err := parseNetlink(buf[:n])
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.typ == unix.NLMSG_ERROR && m.seq == seq && len(m.data) >= 4 {
				if code := int32(binary.NativeEndian.Uint32(m.data)); code != 0 {
					return fmt.Errorf("nfqueue config: %w", unix.Errno(-code))
				}
				return nil
			}
		}
	}
}

type nlMsg struct {
	typ  uint16
	seq  uint32
	data []byte // after the netlink header
}

// parseNetlink splits a datagram into netlink messages.
func parseNetlink(b []byte) ([]nlMsg, error) {
	var out []nlMsg
	for len(b) >= unix.NLMSG_HDRLEN {
		l := int(binary.NativeEndian.Uint32(b))
		if l < unix.NLMSG_HDRLEN || l > len(b) {
			return out, fmt.Errorf("bad netlink message length %d", l)
		}
		out = append(out, nlMsg{typ: binary.NativeEndian.Uint16(b[4:]), seq: binary.NativeEndian.Uint32(b[8:]), data: b[unix.NLMSG_HDRLEN:l]})
		b = b[min(len(b), (l+3)&^3):]
	}
	return out, nil
}

// receive queues every packet's id with its due time.
func (dl *Delayer) receive() {
	defer dl.wg.Done()
	buf := make([]byte, 1<<16)
	for {
		select {
		case <-dl.stop:
			return
		default:
		}
		n, _, err := unix.Recvfrom(dl.fd, buf, 0)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) || errors.Is(err, unix.ENOBUFS) {
				continue
			}
			return
		}
		now := time.Now()
		msgs, err := parseNetlink(buf[:n])
		if err != nil {
			continue
		}
		for _, m := range msgs {
			if m.typ != nfnlSubsysQueue<<8|nfqnlMsgPacket || len(m.data) < 4 {
				continue
			}
			if id, ok := packetID(m.data[4:]); ok {
				select {
				case dl.pending <- held{id, now.Add(dl.delay)}:
				default: // should not happen: the kernel queue is smaller
					dl.verdict(id)
				}
			}
		}
	}
}

// packetID finds NFQA_PACKET_HDR among the attributes.
func packetID(b []byte) (uint32, bool) {
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b))
		typ := binary.NativeEndian.Uint16(b[2:]) & 0x3fff
		if l < 4 || l > len(b) {
			return 0, false
		}
		if typ == nfqaPacketHdr && l >= 8 {
			return binary.BigEndian.Uint32(b[4:]), true
		}
		b = b[min(len(b), (l+3)&^3):]
	}
	return 0, false
}

// release accepts each packet when it is due (FIFO: the delay is constant).
func (dl *Delayer) release() {
	defer dl.wg.Done()
	for {
		select {
		case h := <-dl.pending:
			if wait := time.Until(h.due); wait > 0 {
				select {
				case <-time.After(wait):
				case <-dl.stop:
				}
			}
			dl.verdict(h.id)
		case <-dl.stop:
			for {
				select {
				case h := <-dl.pending:
					dl.verdict(h.id)
				default:
					return
				}
			}
		}
	}
}

func (dl *Delayer) verdict(id uint32) {
	v := binary.BigEndian.AppendUint32(nil, nfAccept)
	v = binary.BigEndian.AppendUint32(v, id)
	msg := dl.message(nfqnlMsgVerdict, unix.NLM_F_REQUEST, []nlAttr{{nfqaVerdictHdr, v}})
	if err := unix.Sendto(dl.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		dl.Failures.Add(1)
		return
	}
	dl.Packets.Add(1)
}

// Stop removes the rule, releases every held packet and closes the socket.
// Idempotent.
func (dl *Delayer) Stop() {
	dl.once.Do(func() {
		_ = dl.host.IPTables("-D", "OUTPUT", "-o", "eth0", "-j", "NFQUEUE", "--queue-num", fmt.Sprint(delayQueueNum), "--queue-bypass")
		close(dl.stop)
		dl.wg.Wait()
		for { // ids queued after release() flushed
			select {
			case h := <-dl.pending:
				dl.verdict(h.id)
				continue
			default:
			}
			break
		}
		unix.Close(dl.fd)
	})
}

// MeasureRTT times a TCP connection set-up from h to addr (one round trip).
func (h *Host) MeasureRTT(addr string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	c, err := h.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	rtt := time.Since(start)
	c.Close()
	return rtt, nil
}
