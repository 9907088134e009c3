// Package consensus holds shoal's raft layer: the consensus keyring
// (Keyring, ParseKeyring), a secret shared by the voters and separate from
// the gossip key, from which each voter derives its TLS identity and its
// term-signing key; the authenticated, encrypted stream layer that carries
// hashicorp/raft's NetworkTransport (StreamLayer, Probe), which refuses any
// peer that does not hold a key of the keyring; and term signatures
// (SignTerm, VerifyTerm).
package consensus
