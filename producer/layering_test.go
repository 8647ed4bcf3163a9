package producer

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// wireImports lists the packages of dir's non-test Go files that speak
// Kafka's wire format (kmsg and kbin), with the file importing each.
func wireImports(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	found := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range parsed.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			if strings.HasPrefix(path, "github.com/twmb/franz-go/pkg/kmsg") || strings.HasPrefix(path, "github.com/twmb/franz-go/pkg/kbin") {
				found[path] = f
			}
		}
	}
	return found
}

// TestProducerDoesNotSpeakTheWire: the producer package gets results from
// protocol (Conn.Produce, Metadata, InitProducerID) and never builds or
// reads a kmsg message itself: none of its non-test files imports kmsg or
// kbin. The same scan finds protocol's imports of them, so it is not
// vacuous.
func TestProducerDoesNotSpeakTheWire(t *testing.T) {
	require.Empty(t, wireImports(t, "."))
	require.Contains(t, wireImports(t, filepath.Join("..", "protocol")), "github.com/twmb/franz-go/pkg/kmsg")
}
