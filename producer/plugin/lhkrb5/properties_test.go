package lhkrb5

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const jaasKeytab = `com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="/etc/app.keytab" principal="app@EXAMPLE.COM";`

// TestFromProperties covers the Java config that FromProperties
// promises to read, the properties it removes and keeps, and each
// error.
func TestFromProperties(t *testing.T) {
	cfg, rest, err := FromProperties(map[string]string{
		"bootstrap.servers":                        "b:9092",
		"security.protocol":                        "SASL_SSL",
		"sasl.mechanism":                           "gssapi",
		"sasl.kerberos.service.name":               "kafka",
		"sasl.kerberos.ticket.renew.window.factor": "0.8",
		"sasl.kerberos.kinit.cmd":                  "/usr/bin/kinit",
		"sasl.jaas.config":                         jaasKeytab,
	})
	require.NoError(t, err)
	require.Equal(t, Config{Principal: "app@EXAMPLE.COM", KeytabFile: "/etc/app.keytab", ServiceName: "kafka"}, cfg)
	require.Equal(t, map[string]string{"bootstrap.servers": "b:9092", "security.protocol": "SASL_SSL"}, rest)

	// Java's default mechanism is GSSAPI; serviceName may come from JAAS;
	// single quotes, escapes, other flags, unknown options.
	cfg, _, err = FromProperties(map[string]string{
		"sasl.jaas.config": `com.sun.security.auth.module.Krb5LoginModule  Requisite
			useKeyTab = true keyTab='C:\\keys\\app.keytab' principal=app serviceName="kafka2" somethingElse=1 debug=true ;  `,
	})
	require.NoError(t, err)
	require.Equal(t, Config{Principal: "app", KeytabFile: `C:\keys\app.keytab`, ServiceName: "kafka2"}, cfg)

	for _, c := range []struct {
		name  string
		props map[string]string
		want  string
	}{
		{"Mechanism", map[string]string{"sasl.mechanism": "PLAIN", "sasl.jaas.config": jaasKeytab}, `sasl.mechanism "PLAIN": want GSSAPI`},
		{"NoJAAS", map[string]string{"sasl.kerberos.service.name": "kafka"}, "sasl.jaas.config is required"},
		{"OtherModule", map[string]string{"sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b";`}, "want com.sun.security.auth.module.Krb5LoginModule"},
		{"TicketCache", map[string]string{"sasl.kerberos.service.name": "kafka", "sasl.jaas.config": `com.sun.security.auth.module.Krb5LoginModule required useTicketCache=true;`}, "ticket cache is not supported"},
		{"NoKeytab", map[string]string{"sasl.kerberos.service.name": "kafka", "sasl.jaas.config": `com.sun.security.auth.module.Krb5LoginModule required principal="a";`}, "needs useKeyTab=true"},
		{"NoPrincipal", map[string]string{"sasl.kerberos.service.name": "kafka", "sasl.jaas.config": `com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="/k";`}, `needs principal=`},
		{"NoService", map[string]string{"sasl.jaas.config": jaasKeytab}, "sasl.kerberos.service.name is required"},
		{"NoSemicolon", map[string]string{"sasl.jaas.config": strings.TrimSuffix(jaasKeytab, ";")}, "missing ';'"},
		{"TwoModules", map[string]string{"sasl.jaas.config": jaasKeytab + jaasKeytab}, "one login module only"},
		{"BadFlag", map[string]string{"sasl.jaas.config": `com.sun.security.auth.module.Krb5LoginModule mandatory;`}, "control flag"},
		{"Unterminated", map[string]string{"sasl.jaas.config": `com.sun.security.auth.module.Krb5LoginModule required keyTab="/k;`}, "unterminated"},
		{"NoValue", map[string]string{"sasl.jaas.config": `com.sun.security.auth.module.Krb5LoginModule required keyTab=;`}, "option keyTab: value expected"},
		{"NoEquals", map[string]string{"sasl.jaas.config": `com.sun.security.auth.module.Krb5LoginModule required keyTab;`}, "'=' expected"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := FromProperties(c.props)
			require.ErrorContains(t, err, c.want)
		})
	}
}

// FuzzParseJAAS checks that the JAAS reader never panics and that what
// it accepts reads back the same after quoting every value.
func FuzzParseJAAS(f *testing.F) {
	f.Add(jaasKeytab)
	f.Add(`m required a='x\'y' b="\n\t\\";`)
	f.Add(`m optional;`)
	f.Fuzz(func(t *testing.T, s string) {
		module, opts, err := parseJAAS(s)
		if err != nil {
			return
		}
		var b strings.Builder
		b.WriteString(module + " required")
		for k, v := range opts {
			b.WriteString(" " + k + `="` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`).Replace(v) + `"`)
		}
		b.WriteString(";")
		m2, opts2, err := parseJAAS(b.String())
		if err != nil {
			t.Fatalf("%q parsed, its requoting %q does not: %v", s, b.String(), err)
		}
		if m2 != module || len(opts2) != len(opts) {
			t.Fatalf("%q: %q %v, requoted: %q %v", s, module, opts, m2, opts2)
		}
		for k, v := range opts {
			if opts2[k] != v {
				t.Fatalf("%q: option %s %q, requoted %q", s, k, v, opts2[k])
			}
		}
	})
}

// TestNewConfigErrors covers New's checks that need no KDC.
func TestNewConfigErrors(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "krb5.conf")
	require.NoError(t, os.WriteFile(conf, []byte("[libdefaults]\n\tdns_lookup_kdc = false\n"), 0o644))
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"NoService", Config{Principal: "a@R", Password: "p", Krb5Conf: conf}, "ServiceName (sasl.kerberos.service.name) is required"},
		{"ServiceWithHost", Config{Principal: "a@R", Password: "p", ServiceName: "kafka/host", Krb5Conf: conf}, "want a service name alone"},
		{"Neither", Config{Principal: "a@R", ServiceName: "kafka", Krb5Conf: conf}, "exactly one of KeytabFile and Password"},
		{"Both", Config{Principal: "a@R", Password: "p", KeytabFile: "/k", ServiceName: "kafka", Krb5Conf: conf}, "exactly one of KeytabFile and Password"},
		{"NoRealm", Config{Principal: "a", Password: "p", ServiceName: "kafka", Krb5Conf: conf}, `Principal "a": want name@REALM`},
		{"MissingConf", Config{Principal: "a@R", Password: "p", ServiceName: "kafka", Krb5Conf: filepath.Join(dir, "none")}, "krb5.conf " + filepath.Join(dir, "none")},
		{"MissingKeytab", Config{Principal: "a@R", KeytabFile: filepath.Join(dir, "none.keytab"), ServiceName: "kafka", Krb5Conf: conf}, "keytab " + filepath.Join(dir, "none.keytab")},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.cfg)
			require.ErrorContains(t, err, c.want)
		})
	}
	t.Setenv("KRB5_CONFIG", filepath.Join(dir, "from-env.conf")+string(os.PathListSeparator)+conf)
	_, err := New(Config{Principal: "a@R", Password: "p", ServiceName: "kafka"})
	require.ErrorContains(t, err, "krb5.conf "+filepath.Join(dir, "from-env.conf"), "the first file of KRB5_CONFIG")
}

// TestServiceHost checks the broker half of the service principal: the
// address's host in lower case, an IP address resolved back to its name
// (127.0.0.1 is localhost in every hosts file).
func TestServiceHost(t *testing.T) {
	ctx := t.Context()
	for in, want := range map[string]string{
		"Broker-1.Example.COM:9092": "broker-1.example.com",
		"broker:9092":               "broker",
		"broker":                    "broker",
		"127.0.0.1:9092":            "localhost",
	} {
		got, err := serviceHost(ctx, in)
		require.NoError(t, err)
		require.Equal(t, want, got, in)
	}
	_, err := serviceHost(ctx, ":9092")
	require.ErrorContains(t, err, "has no host")
}
