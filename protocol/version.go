package protocol

import (
	"runtime/debug"
	"strings"
	"sync"
)

// modulePath is the module whose version is reported to brokers.
const modulePath = "github.com/longhaul-kafka/longhaul"

// clientSoftwareName is sent in ApiVersions v3+ (KIP-511) with
// [clientSoftwareVersion]. Brokers report both in their client metrics and
// logs, and reject a request whose name or version does not match
// [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?.
const clientSoftwareName = "longhaul"

// clientSoftwareVersion is this module's version as the Go toolchain
// recorded it in the binary (runtime/debug.ReadBuildInfo), computed once.
var clientSoftwareVersion = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return softwareVersion(nil)
	}
	return softwareVersion(bi)
})

// softwareVersion finds this module in bi, the main module or a dependency
// (following a replace directive to its replacement's version), and turns
// its version into one a broker accepts: the leading "v" is dropped ("v1.2.3"
// is sent as "1.2.3", as the Java client sends "3.7.0") and any character
// outside [a-zA-Z0-9.-] becomes "-" ("v1.0.0+incompatible" is sent as
// "1.0.0-incompatible"). A binary built without module information, or
// from a work tree without a version ("(devel)", a local replace), sends
// "unknown".
func softwareVersion(bi *debug.BuildInfo) string {
	v := ""
	if bi != nil {
		if bi.Main.Path == modulePath {
			v = bi.Main.Version
		}
		for _, d := range bi.Deps {
			if d.Path != modulePath {
				continue
			}
			v = d.Version
			if d.Replace != nil {
				v = d.Replace.Version
			}
		}
	}
	return sanitizeVersion(v)
}

// sanitizeVersion maps v onto the broker's pattern for software versions;
// see [softwareVersion].
func sanitizeVersion(v string) string {
	v = strings.TrimPrefix(v, "v")
	b := []byte(v)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			b[i] = '-'
		}
	}
	v = strings.Trim(string(b), ".-")
	if v == "" || v == "devel" {
		return "unknown"
	}
	return v
}
