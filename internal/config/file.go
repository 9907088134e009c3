package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"

	"gopkg.in/yaml.v3"
)

var yamlFieldRe = regexp.MustCompile(`line (\d+): field (\S+) not found in type \S+`)

// LoadFile decodes the YAML file at path over c. Unknown keys are errors
// naming the file, the line and the key.
func LoadFile(path string, c *Config) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	if err := decode(data, c); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	return nil
}

func decode(data []byte, c *Config) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		var te *yaml.TypeError
		if errors.As(err, &te) {
			var errs []error
			for _, m := range te.Errors {
				if sm := yamlFieldRe.FindStringSubmatch(m); sm != nil {
					errs = append(errs, fmt.Errorf("line %s: unknown key %q", sm[1], sm[2]))
					continue
				}
				errs = append(errs, errors.New(m))
			}
			return errors.Join(errs...)
		}
		return err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return errors.New("more than one YAML document; put the whole configuration in one")
	}
	return nil
}
