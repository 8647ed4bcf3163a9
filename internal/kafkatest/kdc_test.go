package kafkatest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestKDC checks the harness's KDC with MIT's own client: a password
// principal and a keytab of a random-key principal both get tickets
// (kinit with Env), the short ticket lifetime asked for is the one
// issued, the KDC logs each AS_REQ, a failed kadmin.local query is an
// error, and the listener config names the keytab and principal.
func TestKDC(t *testing.T) {
	k := StartKDC(t, KDCOptions{MaxLife: "3m", MaxRenew: "5m"})
	kinit, err := exec.LookPath("kinit")
	if err != nil {
		if !required() {
			t.Skip("kinit not found (krb5-user)")
		}
		t.Fatal(err)
	}
	k.AddPrincipal(t, "alice", "alice-pw")
	k.AddPrincipal(t, "svc/localhost", "")
	kt := k.Keytab(t, "svc.keytab", "svc/localhost")
	ccache := filepath.Join(t.TempDir(), "ccache")
	env := append(append(os.Environ(), k.Env()...), "KRB5CCNAME=FILE:"+ccache)
	run := func(stdin string, name string, args ...string) string {
		cmd := exec.Command(name, args...)
		cmd.Env, cmd.Stdin = env, strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s %v: %s", name, args, out)
		return string(out)
	}
	run("alice-pw\n", kinit, "alice@"+KDCRealm)
	run("", kinit, "-k", "-t", kt, "svc/localhost@"+KDCRealm)
	klist := run("", filepath.Join(filepath.Dir(kinit), "klist"))
	require.Contains(t, klist, "svc/localhost@"+KDCRealm)
	_, err = k.Admin("getprinc nobody")
	require.Error(t, err, "a failed query is an error")
	out, err := k.Admin("getprinc alice")
	require.NoError(t, err)
	require.Contains(t, out, "Maximum ticket life: 0 days 00:03:00")
	log := k.Log()
	require.Contains(t, log, "alice@"+KDCRealm+" for krbtgt/"+KDCRealm)
	require.Contains(t, log, "svc/localhost@"+KDCRealm+" for krbtgt/"+KDCRealm)

	require.Equal(t, "-Djava.security.krb5.conf="+k.Krb5Conf, k.JVMFlag())
	lc := GSSAPIListenerConfig("kafka", kt, "kafka/localhost@"+KDCRealm)
	require.Equal(t, "GSSAPI", lc["sasl.enabled.mechanisms"])
	require.Contains(t, lc["gssapi.sasl.jaas.config"], `keyTab="`+kt+`" principal="kafka/localhost@`+KDCRealm+`";`)
}
