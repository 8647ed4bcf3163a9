package lhkrb5

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/kafkatest"
	"github.com/longhaul-kafka/longhaul/producer"
)

// kerberosEnv is an MIT KDC and a Kafka 4.4 broker with a
// SASL_PLAINTEXT listener GSSAPI that accepts service kafka/localhost,
// and users app (password app-secret, also in app.keytab).
type kerberosEnv struct {
	kdc       *kafkatest.KDC
	c         *kafkatest.Cluster
	bootstrap string
	appKeytab string
}

const appPassword = "app-secret"

func startKerberos(t *testing.T, kdcOpts kafkatest.KDCOptions, brokerConfig map[string]string) *kerberosEnv {
	kdc := kafkatest.StartKDC(t, kdcOpts)
	kdc.AddPrincipal(t, "kafka/localhost", "")
	brokerKeytab := kdc.Keytab(t, "kafka.keytab", "kafka/localhost")
	kdc.AddPrincipal(t, "app", appPassword)
	appKeytab := kdc.Keytab(t, "app.keytab", "app")
	c := kafkatest.Start(t, kafkatest.Options{
		JVMFlags:     []string{kdc.JVMFlag()},
		BrokerConfig: brokerConfig,
		Listeners: []kafkatest.Listener{{
			Name: "GSSAPI", Protocol: "SASL_PLAINTEXT",
			Config: kafkatest.GSSAPIListenerConfig("kafka", brokerKeytab, "kafka/localhost@"+kafkatest.KDCRealm),
		}},
	})
	return &kerberosEnv{kdc: kdc, c: c, bootstrap: c.ListenerBootstrap("GSSAPI"), appKeytab: appKeytab}
}

// produceN produces n records through the GSSAPI listener with k and
// returns the first error.
func (e *kerberosEnv) produceN(t *testing.T, k *Client, topic string, n int, opts ...producer.Opt) error {
	t.Helper()
	p, err := producer.New(append([]producer.Opt{
		producer.BootstrapServers(e.bootstrap),
		producer.Property("security.protocol", "SASL_PLAINTEXT"),
		producer.Property("delivery.timeout.ms", "40000"),
		k.Option(),
	}, opts...)...)
	require.NoError(t, err)
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var recs []*producer.Record
	for i := range n {
		recs = append(recs, &producer.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", i)})
	}
	return p.ProduceSync(ctx, recs...).FirstErr()
}

// TestKafkaGSSAPI produces to Kafka 4.4 over SASL_PLAINTEXT with GSSAPI
// against an MIT KDC: logged in with a keytab, with a password, and from
// a pasted Java config (FromProperties); every record is acknowledged
// and the broker logs the principal. The control, a service name the
// KDC does not know, fails the records with the KDC's error.
func TestKafkaGSSAPI(t *testing.T) {
	e := startKerberos(t, kafkatest.KDCOptions{}, nil)
	e.c.CreateTopic(t, "krb", 1, 1, nil)
	conf := e.kdc.Krb5Conf

	t.Run("Keytab", func(t *testing.T) {
		k, err := New(Config{Principal: "app@" + kafkatest.KDCRealm, KeytabFile: e.appKeytab, ServiceName: "kafka", Krb5Conf: conf})
		require.NoError(t, err)
		defer k.Close()
		require.NoError(t, e.produceN(t, k, "krb", 100))
	})
	t.Run("Password", func(t *testing.T) {
		// No realm: krb5.conf's default_realm.
		k, err := New(Config{Principal: "app", Password: appPassword, ServiceName: "kafka", Krb5Conf: conf})
		require.NoError(t, err)
		defer k.Close()
		require.NoError(t, e.produceN(t, k, "krb", 100))
	})
	t.Run("JavaProperties", func(t *testing.T) {
		cfg, rest, err := FromProperties(map[string]string{
			"security.protocol":          "SASL_PLAINTEXT",
			"sasl.mechanism":             "GSSAPI",
			"sasl.kerberos.service.name": "kafka",
			"sasl.jaas.config": `com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="` +
				e.appKeytab + `" principal="app@` + kafkatest.KDCRealm + `";`,
		})
		require.NoError(t, err)
		require.Equal(t, map[string]string{"security.protocol": "SASL_PLAINTEXT"}, rest)
		cfg.Krb5Conf = conf
		k, err := New(cfg)
		require.NoError(t, err)
		defer k.Close()
		require.NoError(t, e.produceN(t, k, "krb", 10))
	})
	require.Eventually(t, func() bool {
		return strings.Contains(readLog(t, e.c), "app@"+kafkatest.KDCRealm)
	}, 10*time.Second, 100*time.Millisecond, "the broker never logged app@%s", kafkatest.KDCRealm)

	t.Run("UnknownService", func(t *testing.T) {
		k, err := New(Config{Principal: "app", Password: appPassword, ServiceName: "nokafka", Krb5Conf: conf})
		require.NoError(t, err)
		defer k.Close()
		err = e.produceN(t, k, "krb", 1,
			producer.Property("request.timeout.ms", "3000"), producer.Property("delivery.timeout.ms", "5000"))
		require.ErrorContains(t, err, "lhkrb5: service ticket for nokafka/localhost@"+kafkatest.KDCRealm)
		require.ErrorContains(t, err, "KDC_ERR_S_PRINCIPAL_UNKNOWN")
		t.Logf("unknown service: %v", err)
	})
}

func readLog(t *testing.T, c *kafkatest.Cluster) string {
	t.Helper()
	b, err := os.ReadFile(c.LogFile(0))
	require.NoError(t, err)
	return string(b)
}

// TestKerberosLoginErrors checks that a wrong password, a keytab with a
// stale key and an unknown principal fail New itself, with the
// principal and the KDC's error in the message; the correct password
// (the control) logs in.
func TestKerberosLoginErrors(t *testing.T) {
	kdc := kafkatest.StartKDC(t, kafkatest.KDCOptions{})
	conf := kdc.Krb5Conf
	kdc.AddPrincipal(t, "carol", "right")
	stale := kdc.Keytab(t, "carol.keytab", "carol")
	k, err := New(Config{Principal: "carol", Password: "right", ServiceName: "kafka", Krb5Conf: conf})
	require.NoError(t, err, "control: the right password")
	k.Close()
	k, err = New(Config{Principal: "carol", KeytabFile: stale, ServiceName: "kafka", Krb5Conf: conf})
	require.NoError(t, err, "control: the keytab before the password changes")
	k.Close()

	_, err = New(Config{Principal: "carol", Password: "wrong", ServiceName: "kafka", Krb5Conf: conf})
	require.ErrorContains(t, err, "lhkrb5: login as carol@"+kafkatest.KDCRealm+" with password")
	require.ErrorContains(t, err, "KDC_ERR_PREAUTH_FAILED")
	t.Logf("wrong password: %v", err)

	_, err = kdc.Admin("cpw -pw changed carol")
	require.NoError(t, err)
	_, err = New(Config{Principal: "carol", KeytabFile: stale, ServiceName: "kafka", Krb5Conf: conf})
	require.ErrorContains(t, err, "lhkrb5: login as carol@"+kafkatest.KDCRealm+" with keytab "+stale)
	require.ErrorContains(t, err, "KDC_ERR_PREAUTH_FAILED")
	t.Logf("stale keytab: %v", err)

	_, err = New(Config{Principal: "nobody", Password: "x", ServiceName: "kafka", Krb5Conf: conf})
	require.ErrorContains(t, err, "KDC_ERR_C_PRINCIPAL_UNKNOWN")
	t.Logf("unknown principal: %v", err)
}

// TestKafkaGSSAPIRenewal runs two producers, one logged in with a keytab
// (app) and one with a password (pw), for longer than two ticket
// lifetimes (KDC tickets of 1 minute, renewable for 2) against a broker
// that makes every session re-authenticate after 10 s: every record is
// acknowledged, and the KDC log shows new ticket-granting tickets
// (renewals or logins) and new service tickets for each during the run,
// not only the first ones.
func TestKafkaGSSAPIRenewal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about 3 minutes")
	}
	e := startKerberos(t, kafkatest.KDCOptions{MaxLife: "1m", MaxRenew: "2m"},
		map[string]string{"connections.max.reauth.ms": "10000"})
	e.kdc.AddPrincipal(t, "pw", "pw-secret")
	e.c.CreateTopic(t, "renew", 1, 1, nil)
	type run struct {
		cfg           Config
		acked, failed atomic.Int64
		firstErr      atomic.Value
		before, after tickets
	}
	runs := []*run{
		{cfg: Config{Principal: "app", KeytabFile: e.appKeytab}},
		{cfg: Config{Principal: "pw", Password: "pw-secret"}},
	}
	var wg sync.WaitGroup
	for _, r := range runs {
		r.cfg.ServiceName, r.cfg.Krb5Conf = "kafka", e.kdc.Krb5Conf
		k, err := New(r.cfg)
		require.NoError(t, err)
		defer k.Close()
		r.before = ticketCounts(e.kdc.Log(), r.cfg.Principal)
		p, err := producer.New(
			producer.BootstrapServers(e.bootstrap),
			producer.Property("security.protocol", "SASL_PLAINTEXT"),
			producer.Property("linger.ms", "5"),
			k.Option(),
		)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			end := time.Now().Add(150 * time.Second)
			for i := 0; time.Now().Before(end); i++ {
				p.Produce(context.Background(), &producer.Record{Topic: "renew", Value: fmt.Appendf(nil, "%s-%d", r.cfg.Principal, i)}, func(_ *producer.Record, err error) {
					if err != nil {
						r.failed.Add(1)
						r.firstErr.CompareAndSwap(nil, err)
						return
					}
					r.acked.Add(1)
				})
				time.Sleep(20 * time.Millisecond)
			}
			p.Close(context.Background())
		}()
	}
	wg.Wait()
	for _, r := range runs {
		r.after = ticketCounts(e.kdc.Log(), r.cfg.Principal)
		tgt, svc := r.after.tgt-r.before.tgt, r.after.service-r.before.service
		t.Logf("%s (keytab %v): %d records acknowledged; the KDC issued it %d TGTs (AS_REQ or krbtgt renewals) and %d kafka/localhost tickets during the run",
			r.cfg.Principal, r.cfg.KeytabFile != "", r.acked.Load(), tgt, svc)
		require.Zero(t, r.failed.Load(), "%s: first failure: %v", r.cfg.Principal, r.firstErr.Load())
		require.NotZero(t, r.acked.Load())
		require.GreaterOrEqual(t, tgt, 3, "%s: a TGT lives 1 minute: 150 s need the first and at least two more", r.cfg.Principal)
		require.GreaterOrEqual(t, svc, 3, "%s: a service ticket lives 1 minute: 150 s need at least three", r.cfg.Principal)
	}
}

type tickets struct{ tgt, service int }

var issued = regexp.MustCompile(`(AS_REQ|TGS_REQ) .*ISSUE: .* for (\S+)`)

// ticketCounts counts the TGTs and kafka/localhost tickets the KDC
// issued to principal (without realm).
func ticketCounts(log, principal string) tickets {
	var n tickets
	for _, l := range strings.Split(log, "\n") {
		m := issued.FindStringSubmatch(l)
		if m == nil || !strings.Contains(l, " "+principal+"@"+kafkatest.KDCRealm+" for ") {
			continue
		}
		switch {
		case strings.HasPrefix(m[2], "krbtgt/"):
			n.tgt++
		case strings.HasPrefix(m[2], "kafka/localhost@"):
			n.service++
		}
	}
	return n
}
