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
	for _, f := range facts {
		b = f.enc(b, h)
	}
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
