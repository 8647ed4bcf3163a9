package protocol

import (
	"regexp"
	"runtime/debug"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// brokerSoftwarePattern is the pattern Kafka's ApiVersionsRequest.isValid
// checks client_software_name and client_software_version against.
var brokerSoftwarePattern = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

func TestSoftwareVersionFromBuildInfo(t *testing.T) {
	dep := func(path, version string, replace *debug.Module) *debug.Module {
		return &debug.Module{Path: path, Version: version, Replace: replace}
	}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "unknown"},
		{"dependency tag", &debug.BuildInfo{
			Main: debug.Module{Path: "example.com/app", Version: "(devel)"},
			Deps: []*debug.Module{dep("github.com/twmb/franz-go", "v1.22.3", nil), dep(modulePath, "v1.2.3", nil)},
		}, "1.2.3"},
		{"dependency pseudo-version", &debug.BuildInfo{
			Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{dep(modulePath, "v0.0.0-20260918054303-01f206a7e32c", nil)},
		}, "0.0.0-20260918054303-01f206a7e32c"},
		{"replaced by a fork's version", &debug.BuildInfo{
			Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{dep(modulePath, "v1.2.3", dep("example.com/fork", "v1.2.4-fix.1", nil))},
		}, "1.2.4-fix.1"},
		{"replaced by a directory", &debug.BuildInfo{
			Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{dep(modulePath, "v1.2.3", dep("../longhaul", "", nil))},
		}, "unknown"},
		{"main module stamped from VCS", &debug.BuildInfo{
			Main: debug.Module{Path: modulePath, Version: "v0.3.0-rc.1+dirty"},
		}, "0.3.0-rc.1-dirty"},
		{"main module in a work tree", &debug.BuildInfo{
			Main: debug.Module{Path: modulePath, Version: "(devel)"},
		}, "unknown"},
		{"other module only", &debug.BuildInfo{
			Main: debug.Module{Path: "example.com/app", Version: "v9.9.9"},
		}, "unknown"},
		{"incompatible", &debug.BuildInfo{
			Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{dep(modulePath, "v2.0.0+incompatible", nil)},
		}, "2.0.0-incompatible"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := softwareVersion(tc.bi)
			assert.Equal(t, tc.want, got)
			assert.Regexp(t, brokerSoftwarePattern, got, "a broker rejects this version")
		})
	}
	assert.Regexp(t, brokerSoftwarePattern, clientSoftwareName)
}

// TestApiVersionsCarriesBuildVersion: Dial sends the name and the version
// read from this binary's build info, not a constant.
func TestApiVersionsCarriesBuildVersion(t *testing.T) {
	b := newFakeBroker(t)
	var mu sync.Mutex
	var got []*kmsg.ApiVersionsRequest
	b.onFrame = func(f []byte) {
		if _, req, err := ParseRequest(f); err == nil {
			if r, ok := req.(*kmsg.ApiVersionsRequest); ok {
				mu.Lock()
				got = append(got, r)
				mu.Unlock()
			}
		}
	}
	dialT(t, b.listen(), DialConfig{})
	bi, ok := debug.ReadBuildInfo()
	require.True(t, ok, "test binaries carry build info")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 1)
	assert.Equal(t, "longhaul", got[0].ClientSoftwareName)
	assert.Equal(t, softwareVersion(bi), got[0].ClientSoftwareVersion)
	assert.Regexp(t, brokerSoftwarePattern, got[0].ClientSoftwareVersion)
}
