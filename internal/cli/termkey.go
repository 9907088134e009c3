package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/internal/consensus"
)

// maxKeyInput bounds what term-key reads: a keyring holds a few keys.
const maxKeyInput = 64 << 10

func newTermKeyCmd(g *globals) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "term-key",
		Short: "Print the public key(s) that verify writer terms, for consensus.term_key",
		Long: `Print the term-signing public keys of a consensus keyring, comma-separated, as
consensus.term_key (--consensus-term-key) wants them. App agents given only these can verify
the writer terms the voters sign, without holding the consensus key.

The consensus key is secret, so it is never an argument: give the keyring file with
--keyring-file, or the key (or a keyring file's JSON) on standard input:
  shoal term-key --keyring-file /var/lib/shoal/consensus.keyring
  shoal term-key < consensus.key`,
		Args: exactArgs(0, "no arguments (the key comes from --keyring-file or standard input)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			src, name := io.Reader(cmd.InOrStdin()), "standard input"
			if file != "" {
				f, err := os.Open(file)
				if err != nil {
					return usagef("--keyring-file: %v", err)
				}
				defer f.Close()
				src, name = f, file
			}
			keys, err := readConsensusKeys(src)
			if err != nil {
				return usagef("%s: %v", name, err)
			}
			kr, err := consensus.ParseKeyring(keys)
			if err != nil {
				return usagef("%s: %v", name, err)
			}
			var out []string
			for _, pub := range kr.TermPublicKeys() {
				out = append(out, consensus.EncodePublicKey(pub))
			}
			fmt.Fprintln(g.stdout, strings.Join(out, ","))
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "keyring-file", "", "consensus keyring file (JSON array of base64 keys, primary first)")
	return cmd
}

// readConsensusKeys reads a keyring file's JSON array, or one base64 key
// on a line.
func readConsensusKeys(r io.Reader) ([]string, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxKeyInput+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxKeyInput {
		return nil, fmt.Errorf("more than %d bytes: not a key or a keyring", maxKeyInput)
	}
	s := strings.TrimSpace(string(b))
	if strings.HasPrefix(s, "[") {
		var keys []string
		if err := json.Unmarshal([]byte(s), &keys); err != nil {
			return nil, fmt.Errorf("not a keyring (JSON array of base64 keys): %v", err)
		}
		return keys, nil
	}
	sc := bufio.NewScanner(strings.NewReader(s))
	var keys []string
	for sc.Scan() {
		if k := strings.TrimSpace(sc.Text()); k != "" {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("no key given")
	}
	return keys, nil
}
