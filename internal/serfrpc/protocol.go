package serfrpc

import (
	"github.com/hashicorp/go-msgpack/v2/codec"
)

// The Serf RPC protocol as serf v0.11.0 serves it
// (cmd/serf/command/agent/ipc.go, ipc_event_stream.go, ipc_log_stream.go,
// ipc_query_response_stream.go). Every message is one or two msgpack values:
// a request is a requestHeader, followed by a body for the commands that
// take one; a response is a responseHeader, followed by a body for the
// commands that return one. stream, monitor and query answer with a header
// alone and later send records (header with the request's Seq, plus a
// body) on the same connection.
//
// What is copied here is on the serf-upgrade checklist (package gossip,
// item 10); TestProtocolMatchesSerf compares it with serf's ipc.go.

const (
	cmdHandshake       = "handshake"
	cmdAuth            = "auth"
	cmdEvent           = "event"
	cmdForceLeave      = "force-leave"
	cmdJoin            = "join"
	cmdMembers         = "members"
	cmdMembersFiltered = "members-filtered"
	cmdStream          = "stream"
	cmdStop            = "stop"
	cmdMonitor         = "monitor"
	cmdLeave           = "leave"
	cmdInstallKey      = "install-key"
	cmdUseKey          = "use-key"
	cmdRemoveKey       = "remove-key"
	cmdListKeys        = "list-keys"
	cmdTags            = "tags"
	cmdQuery           = "query"
	cmdRespond         = "respond"
	cmdStats           = "stats"
	cmdGetCoordinate   = "get-coordinate"
)

// serf's own error strings (ipc.go), so that stock clients recognise them:
// the client library reads no body after errAuthRequired.
const (
	errUnsupportedCommand = "Unsupported command"
	errUnsupportedVersion = "Unsupported IPC version"
	errDuplicateHandshake = "Handshake already performed"
	errHandshakeRequired  = "Handshake required"
	errAuthRequired       = "Authentication required"
	errInvalidAuthToken   = "Invalid authentication token"
)

// ipcVersion is the only IPC version serf v0.11.0 speaks (MinIPCVersion
// and MaxIPCVersion are both 1).
const ipcVersion = 1

// queryRecordDone is the Type of the last record of a query
// (ipc_query_response_stream.go).
const queryRecordDone = "done"

// command says how one command is framed and who may run it.
type command struct {
	reqBody  bool // a request body follows the header
	respBody bool // the response header is followed by a body, even on an error
	records  bool // once answered without error, records with the request's Seq follow, each with a body
	open     bool // read-only: served without auth unless rpc_auth is set
}

// lookup returns the framing of a command served by the agent (handshake
// and auth are the gate's own). Derived from ipc.go, handler by handler:
// a handler that calls client.dec.Decode has a request body, one that
// calls client.Send(&header, &resp) with a non-nil resp has a response body.
func lookup(name string) (command, bool) {
	switch name {
	case cmdMembers, cmdStats: // handleMembers, handleStats
		return command{respBody: true, open: true}, true
	case cmdMembersFiltered, cmdGetCoordinate: // handleMembers, handleGetCoordinate
		return command{reqBody: true, respBody: true, open: true}, true
	case cmdJoin, cmdInstallKey, cmdUseKey, cmdRemoveKey: // joinResponse, keyResponse
		return command{reqBody: true, respBody: true}, true
	case cmdListKeys: // keyResponse, no request body
		return command{respBody: true}, true
	case cmdLeave:
		return command{}, true
	case cmdEvent, cmdForceLeave, cmdStop, cmdTags, cmdRespond:
		return command{reqBody: true}, true
	case cmdStream, cmdMonitor, cmdQuery: // records: memberEventRecord/userEventRecord/queryEventRecord, logRecord, queryRecord
		return command{reqBody: true, records: true}, true
	}
	return command{}, false
}

type requestHeader struct {
	Command string
	Seq     uint64
}

type responseHeader struct {
	Seq   uint64
	Error string
}

type handshakeRequest struct {
	Version int32
}

type authRequest struct {
	AuthKey string
}

type tagsRequest struct {
	Tags       map[string]string
	DeleteTags []string
}

type stopRequest struct {
	Stop uint64
}

type queryRecord struct {
	Type string
}

// msgpackHandle is serf's (ipc.go newMsgpackHandle with the old time
// format, as the agent serves it).
func msgpackHandle() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{WriteExt: true}
	h.TimeNotBuiltin = true
	return h
}

// msgpackNil is the encoding of nil: a value decoded into a codec.Raw as
// nil was this one byte on the wire.
const msgpackNil = 0xc0

func encode(h *codec.MsgpackHandle, vs ...any) ([]byte, error) {
	var out []byte
	enc := codec.NewEncoderBytes(&out, h)
	for _, v := range vs {
		if err := enc.Encode(v); err != nil {
			return nil, err
		}
	}
	return out, nil
}
