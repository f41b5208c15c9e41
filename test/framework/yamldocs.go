package framework

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// EachYAMLDoc calls f with each non-empty document of a multi-document YAML stream, in order, and
// stops at the first error.
func EachYAMLDoc(data []byte, f func(doc []byte) error) error {
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(strings.TrimSpace(string(doc))) == 0 {
			continue
		}
		if err := f(doc); err != nil {
			return err
		}
	}
}
