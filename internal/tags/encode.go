package tags

import "strconv"

// Version is the health tag format version Encode writes and Decode reads.
const Version = "v1"

// Encode returns the health tag value for h.Normalize(). Fields are always
// written in the same order, so equal inputs give equal strings.
func Encode(h Health) string {
	h = h.Normalize()
	b := make([]byte, 0, 128)
	b = append(b, Version...)
	b = append(b, ";h="...)
	b = append(b, h.State.code())
	b = appendBool(b, "ro", h.ReadOnly)
	b = appendBool(b, "sro", h.SuperReadOnly)
	b = appendBool(b, "rep", h.Replica)
	b = appendBool(b, "io", h.IORunning)
	b = appendBool(b, "sql", h.SQLRunning)
	if h.LagKnown {
		b = appendUint(b, "lag", h.LagSeconds)
	}
	b = appendUint(b, "sid", h.ServerID)
	if h.Galera {
		b = appendBool(b, "g", h.GaleraSynced)
	}
	if h.Reason != "" {
		b = append(b, ";rs="...)
		b = append(b, h.Reason...)
	}
	if h.Port != 0 {
		b = appendUint(b, "p", uint32(h.Port))
	}
	b = appendUint(b, "n", h.Seq)
	return string(b)
}

func appendBool(b []byte, key string, v bool) []byte {
	b = append(b, ';')
	b = append(b, key...)
	if v {
		return append(b, "=1"...)
	}
	return append(b, "=0"...)
}

func appendUint(b []byte, key string, v uint32) []byte {
	b = append(b, ';')
	b = append(b, key...)
	b = append(b, '=')
	return strconv.AppendUint(b, uint64(v), 10)
}
