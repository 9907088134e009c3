package gossip

import (
	"bytes"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// serfLeaveMsg is serf's leave intent on the wire (serf/messages.go
// messageLeave, type messageLeaveType = 0): a one-byte type, then the
// struct as a msgpack map.
type serfLeaveMsg struct {
	LTime uint64
	Node  string
	Prune bool
}

const serfMessageLeaveType = 0

// LeaveIntent is serf's leave intent for node at Lamport time lt, as serf
// sends it: a message to hand to memberlist's SendBestEffort, which serf
// reads as if it had been gossiped.
func LeaveIntent(lt uint64, node string) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(serfMessageLeaveType)
	if err := codec.NewEncoder(&buf, &codec.MsgpackHandle{}).Encode(&serfLeaveMsg{LTime: lt, Node: node}); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
