package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCopyFile checks -o: the jar's bytes land at the destination
// (replacing an older file there), readable by the broker's user, and a
// failed copy leaves no file, not even the temporary one.
func TestCopyFile(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "cache.jar")
	require.NoError(t, os.WriteFile(src, []byte("PK\x03\x04 agent"), 0o600))
	dst := filepath.Join(dir, "out", "kip1269-agent.jar")
	require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
	require.NoError(t, os.WriteFile(dst, []byte("old"), 0o600))
	require.NoError(t, copyFile(dst, src))
	b, err := os.ReadFile(dst)
	require.NoError(t, err)
	require.Equal(t, "PK\x03\x04 agent", string(b))
	fi, err := os.Stat(dst)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
	entries, err := os.ReadDir(filepath.Dir(dst))
	require.NoError(t, err)
	require.Len(t, entries, 1, "temporary file left behind")

	require.Error(t, copyFile(filepath.Join(dir, "out", "kip1269-agent.jar"), filepath.Join(dir, "missing.jar")))
	require.Error(t, copyFile(filepath.Join(dir, "nodir", "x.jar"), src))
	_, err = os.Stat(filepath.Join(dir, "nodir"))
	require.True(t, os.IsNotExist(err))
	entries, err = os.ReadDir(filepath.Dir(dst))
	require.NoError(t, err)
	require.Len(t, entries, 1)
}
