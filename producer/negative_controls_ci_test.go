package producer

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNegativeControlsRunInCI: every test of this package that brings a
// bug back (it calls needRegress, reads regressBuild or loops over
// bugCases) is named in .ci/run's longhaul_regress step, which alone runs
// it with its bug: a control missing there would skip everywhere.
func TestNegativeControlsRunInCI(t *testing.T) {
	ci, err := os.ReadFile(filepath.Join("..", ".ci", "run"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?s)go test -tags longhaul_regress[^\n]*\\\n\s*-run '\^\(([^)]*)\)\$' \./producer/`).FindSubmatch(ci)
	require.NotNil(t, m, ".ci/run runs the producer's negative controls with -tags longhaul_regress")
	listed := map[string]bool{}
	for _, name := range strings.Split(string(m[1]), "|") {
		listed[name] = true
	}
	files, err := filepath.Glob("*_test.go")
	require.NoError(t, err)
	testFunc := regexp.MustCompile(`(?m)^func (\w+)\(`)
	uses := regexp.MustCompile(`needRegress\(t\)|regressBuild|bugCases`)
	found := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		locs := testFunc.FindAllSubmatchIndex(src, -1)
		for i, loc := range locs {
			name := string(src[loc[2]:loc[3]])
			end := len(src)
			if i+1 < len(locs) {
				end = locs[i+1][0]
			}
			if !strings.HasPrefix(name, "Test") || name == t.Name() || !uses.Match(src[loc[1]:end]) {
				continue
			}
			found++
			require.True(t, listed[name], "%s (%s) brings a bug back but .ci/run's longhaul_regress step does not run it", name, f)
		}
	}
	require.Equal(t, len(listed), found, "tests listed in .ci/run's longhaul_regress step that bring no bug back (or no longer exist)")
}
