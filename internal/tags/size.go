package tags

import (
	"bytes"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// tagMagicByte is serf's marker in front of msgpack-encoded tags.
const tagMagicByte = 255

// EncodedSize returns the number of bytes serf puts in memberlist's node
// metadata for tags: encoded exactly like serf's encodeTags (the magic byte,
// then the map with go-msgpack's default MsgpackHandle).
func EncodedSize(t map[string]string) int {
	var buf bytes.Buffer
	buf.WriteByte(tagMagicByte)
	if err := codec.NewEncoder(&buf, &codec.MsgpackHandle{}).Encode(t); err != nil {
		// A map of strings always encodes; be conservative if it did not.
		return MetaMaxSize + 1
	}
	return buf.Len()
}

// UserTagsSize returns the bytes the entries of t add to the encoded map,
// without the magic byte and map header. UserTagBudget is measured this way.
func UserTagsSize(t map[string]string) int {
	return EncodedSize(t) - 1 - mapHeaderSize(len(t))
}

func mapHeaderSize(n int) int {
	switch {
	case n < 16:
		return 1
	case n < 1<<16:
		return 3
	default:
		return 5
	}
}
