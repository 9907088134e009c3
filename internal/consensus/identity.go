package consensus

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// Identity is what a voter proves in every raft handshake: its node name
// (its raft server ID) and the raft addresses it is reached at. A voter's
// certificate binds them, signed by a consensus keyring key; a peer that
// dials an address checks that the certificate it gets names the voter it
// expects there at that address, so a process that relays one voter's
// handshake to another address proves nothing for itself.
type Identity struct {
	Node  string
	Addrs []string // host:port
}

func (id Identity) String() string {
	return fmt.Sprintf("%q at %s", id.Node, strings.Join(id.Addrs, ","))
}

// Has reports whether id names node at addr.
func (id Identity) Has(node, addr string) bool {
	return id.Node == node && slices.Contains(id.Addrs, addr)
}

// HasHost reports whether one of id's addresses is on host.
func (id Identity) HasHost(host string) bool {
	for _, a := range id.Addrs {
		if h, _, err := net.SplitHostPort(a); err == nil && h == host {
			return true
		}
	}
	return false
}

// identityScheme is the scheme of the URI (a subject alternative name) that
// carries an identity: shoal-voter:<path-escaped node>?raft=<addr>&raft=...
const identityScheme = "shoal-voter"

// Limits of an identity, checked when one is issued and when one is read.
const (
	maxIdentityNode  = 128
	maxIdentityAddrs = 4
)

// Errors of a handshake whose certificate does not prove the expected
// identity.
var (
	// ErrNoIdentity: the certificate is signed by a keyring key but names
	// no voter (a shoal from before per-voter identities, or a forgery).
	ErrNoIdentity = errors.New("peer certificate names no voter identity")
	// ErrWrongIdentity: the certificate names another voter, or this voter
	// at another address, than the one expected at the address dialed.
	ErrWrongIdentity = errors.New("peer proved another voter identity")
)

// checkIdentity checks an identity's fields.
func checkIdentity(id Identity) error {
	if id.Node == "" || len(id.Node) > maxIdentityNode || !utf8.ValidString(id.Node) {
		return fmt.Errorf("voter identity: node name of %d bytes, want 1 to %d bytes of UTF-8", len(id.Node), maxIdentityNode)
	}
	if len(id.Addrs) == 0 || len(id.Addrs) > maxIdentityAddrs {
		return fmt.Errorf("voter identity: %d raft addresses, want 1 to %d", len(id.Addrs), maxIdentityAddrs)
	}
	for _, a := range id.Addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("voter identity: raft address %q: %w", a, err)
		}
	}
	return nil
}

// identityURI encodes an identity as a URI.
func identityURI(id Identity) *url.URL {
	return &url.URL{Scheme: identityScheme, Opaque: url.PathEscape(id.Node), RawQuery: url.Values{"raft": id.Addrs}.Encode()}
}

// identityOf reads the identity a certificate names.
func identityOf(cert *x509.Certificate) (Identity, error) {
	for _, u := range cert.URIs {
		if u.Scheme != identityScheme {
			continue
		}
		node, err := url.PathUnescape(u.Opaque)
		if err != nil {
			return Identity{}, fmt.Errorf("%w: node name: %w", ErrNoIdentity, err)
		}
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			return Identity{}, fmt.Errorf("%w: raft addresses: %w", ErrNoIdentity, err)
		}
		id := Identity{Node: node, Addrs: q["raft"]}
		if err := checkIdentity(id); err != nil {
			return Identity{}, fmt.Errorf("%w: %w", ErrNoIdentity, err)
		}
		return id, nil
	}
	return Identity{}, ErrNoIdentity
}

// Credentials are one voter's TLS identity: per keyring key, a certificate
// binding the voter's Identity to a key pair of its own, signed by that
// keyring key. The key pair is made anew at each start and never leaves
// the process.
type Credentials struct {
	kr    *Keyring
	id    Identity
	certs []*tls.Certificate // certs[i] is signed by kr.keys[i]
}

// Issue makes the credentials of the voter id: a fresh ed25519 key pair
// and, for every key of the keyring, a certificate binding id to it.
func (k *Keyring) Issue(id Identity) (*Credentials, error) {
	if err := checkIdentity(id); err != nil {
		return nil, err
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("voter key: %w", err)
	}
	c := &Credentials{kr: k, id: Identity{Node: id.Node, Addrs: slices.Clone(id.Addrs)}}
	for i, dk := range k.keys {
		serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
		if err != nil {
			return nil, fmt.Errorf("certificate serial: %w", err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial,
			Subject:      pkix.Name{CommonName: certName},
			DNSNames:     []string{certName},
			URIs:         []*url.URL{identityURI(id)},
			NotBefore:    certNotBefore,
			NotAfter:     certNotAfter,
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, dk.cert.Leaf, pub, dk.ca.priv)
		if err != nil {
			return nil, fmt.Errorf("voter certificate of key %d: %w", i, err)
		}
		leaf, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("parse voter certificate of key %d: %w", i, err)
		}
		c.certs = append(c.certs, &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv, Leaf: leaf})
	}
	return c, nil
}

// Identity is the identity the credentials prove.
func (c *Credentials) Identity() Identity { return c.id }

// Keyring is the keyring the credentials were issued from.
func (c *Credentials) Keyring() *Keyring { return c.kr }

// peerIdentity checks the peer's leaf certificate: it must be signed by a
// key of kr (TLS 1.3 has already proved that the peer holds the private key
// of the leaf) and name a voter. It returns the index of the signing key
// and the identity; errors wrap ErrUnknownKey or ErrNoIdentity.
func peerIdentity(kr *Keyring, cs tls.ConnectionState) (int, Identity, error) {
	if len(cs.PeerCertificates) == 0 {
		return -1, Identity{}, fmt.Errorf("no peer certificate: %w", ErrUnknownKey)
	}
	leaf := cs.PeerCertificates[0]
	if _, ok := leaf.PublicKey.(ed25519.PublicKey); !ok || leaf.SignatureAlgorithm != x509.PureEd25519 {
		return -1, Identity{}, fmt.Errorf("peer certificate key is %T signed with %s, not ed25519: %w",
			leaf.PublicKey, leaf.SignatureAlgorithm, ErrUnknownKey)
	}
	i := kr.signerIndex(leaf)
	if i < 0 {
		return -1, Identity{}, fmt.Errorf("peer certificate of issuer %q: %w", leaf.Issuer.CommonName, ErrUnknownKey)
	}
	id, err := identityOf(leaf)
	if err != nil {
		return -1, Identity{}, err
	}
	return i, id, nil
}

// signerIndex is the index of the key of k whose TLS key signed cert, or -1.
func (k *Keyring) signerIndex(cert *x509.Certificate) int {
	for i, dk := range k.keys {
		if ed25519.Verify(dk.tlsPub, cert.RawTBSCertificate, cert.Signature) {
			return i
		}
	}
	return -1
}

// expectIdentity checks that id names node at addr.
func expectIdentity(id Identity, node, addr string) error {
	if !id.Has(node, addr) {
		return fmt.Errorf("%w: %s answered as %s, want %q", ErrWrongIdentity, addr, id, node)
	}
	return nil
}
