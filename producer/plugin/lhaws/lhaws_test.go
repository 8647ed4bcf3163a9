package lhaws

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/memnet"
	"github.com/longhaul-kafka/longhaul/producer"
)

const (
	mskHost   = "b-1.longhaul.abc123.c2.kafka.us-east-1.amazonaws.com"
	mskRegion = "us-east-1"
	// emptySHA256 is the hex SHA-256 of an empty body, the payload hash of
	// the signed GET.
	emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

// mskVerifier checks AWS_MSK_IAM payloads as MSK would, independently of
// the signing code under test: it rebuilds the signed request and presigns
// it with the AWS SDK's own SigV4 signer for the same credentials, region
// and time, and compares signatures.
type mskVerifier struct {
	host, region string

	mu      sync.Mutex
	secrets map[string]string // access key id -> secret
	tokens  map[string]string // access key id -> session token ("" none)
	seen    []string          // access key ids accepted, in order
	agent   string            // the last user agent accepted
}

func newVerifier(host, region string) *mskVerifier {
	return &mskVerifier{host: host, region: region, secrets: map[string]string{}, tokens: map[string]string{}}
}

func (v *mskVerifier) allow(c aws.Credentials) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.secrets[c.AccessKeyID], v.tokens[c.AccessKeyID] = c.SecretAccessKey, c.SessionToken
}

func (v *mskVerifier) revoke(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.secrets, id)
}

func (v *mskVerifier) accepted() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.seen...)
}

// verify returns nil if msg is a valid AWS_MSK_IAM payload for v's host
// and region signed with credentials v allows, at a time within 5 minutes
// of now.
func (v *mskVerifier) verify(msg []byte) error {
	var kv map[string]string
	if err := json.Unmarshal(msg, &kv); err != nil {
		return fmt.Errorf("payload is not a JSON object of strings: %w", err)
	}
	for k, want := range map[string]string{
		"version": "2020_10_22", "host": v.host, "action": "kafka-cluster:Connect",
		"x-amz-algorithm": "AWS4-HMAC-SHA256", "x-amz-signedheaders": "host", "x-amz-expires": "900",
	} {
		if kv[k] != want {
			return fmt.Errorf("%s = %q, want %q", k, kv[k], want)
		}
	}
	if kv["user-agent"] == "" {
		return errors.New("no user-agent")
	}
	when, err := time.Parse("20060102T150405Z", kv["x-amz-date"])
	if err != nil {
		return fmt.Errorf("x-amz-date: %w", err)
	}
	if d := time.Since(when); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("x-amz-date %v is %v from now", when, d)
	}
	cred := strings.Split(kv["x-amz-credential"], "/")
	if len(cred) != 5 || cred[1] != when.Format("20060102") || cred[2] != v.region || cred[3] != "kafka-cluster" || cred[4] != "aws4_request" {
		return fmt.Errorf("x-amz-credential %q: want <key>/<date>/%s/kafka-cluster/aws4_request", kv["x-amz-credential"], v.region)
	}
	v.mu.Lock()
	secret, known := v.secrets[cred[0]]
	token := v.tokens[cred[0]]
	v.mu.Unlock()
	if !known {
		return fmt.Errorf("unknown access key %s", cred[0])
	}
	if kv["x-amz-security-token"] != token {
		return errors.New("session token mismatch")
	}
	q := url.Values{"Action": {"kafka-cluster:Connect"}, "X-Amz-Expires": {"900"}}
	req, err := http.NewRequest(http.MethodGet, "https://"+v.host+"/?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	signed, _, err := v4.NewSigner().PresignHTTP(context.Background(),
		aws.Credentials{AccessKeyID: cred[0], SecretAccessKey: secret, SessionToken: token},
		req, emptySHA256, "kafka-cluster", v.region, when)
	if err != nil {
		return err
	}
	u, err := url.Parse(signed)
	if err != nil {
		return err
	}
	if want := u.Query().Get("X-Amz-Signature"); want == "" || !hmac.Equal([]byte(want), []byte(kv["x-amz-signature"])) {
		return errors.New("signature mismatch")
	}
	v.mu.Lock()
	v.seen = append(v.seen, cred[0])
	v.agent = kv["user-agent"]
	v.mu.Unlock()
	return nil
}

// saslConfig is the embedded broker's AWS_MSK_IAM listener checked by v,
// with sessions of life (MSK ends a session when its credentials expire).
func (v *mskVerifier) saslConfig(life time.Duration) *broker.SASLConfig {
	return &broker.SASLConfig{Mechanisms: []string{"AWS_MSK_IAM"}, SessionLifetime: life,
		Authenticate: func(mech string, msg []byte) ([]byte, error) {
			if err := v.verify(msg); err != nil {
				return nil, err
			}
			return []byte(`{"version":"2020_10_22","request-id":"test"}`), nil
		}}
}

// rotatingCreds is a credentials provider whose credentials the test
// replaces.
type rotatingCreds struct {
	mu    sync.Mutex
	cur   aws.Credentials
	calls int
}

func (r *rotatingCreds) set(c aws.Credentials) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cur = c
}

func (r *rotatingCreds) Retrieve(context.Context) (aws.Credentials, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	return r.cur, nil
}

var (
	key1 = aws.Credentials{AccessKeyID: "AKIDFIRST", SecretAccessKey: "first-secret", SessionToken: "token-1"}
	key2 = aws.Credentials{AccessKeyID: "AKIDSECOND", SecretAccessKey: "second-secret"}
)

// mskCluster starts the embedded broker at the MSK-like host name, its
// listener checking AWS_MSK_IAM with v.
func mskCluster(t *testing.T, v *mskVerifier, life time.Duration) (*broker.Cluster, *memnet.Network) {
	n := memnet.New()
	c, err := broker.Start(broker.Config{Listen: n.Listen, Addr: mskHost + ":9098", SASL: v.saslConfig(life),
		Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}}})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c, n
}

func newProducer(t *testing.T, c *broker.Cluster, n *memnet.Network, opts ...producer.Opt) *producer.Producer {
	p, err := producer.New(append([]producer.Opt{producer.BootstrapServers(c.Addr()), producer.Dialer(n.Dial),
		producer.Linger(time.Millisecond), producer.RetryBackoff(10 * time.Millisecond)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close(context.Background()) })
	return p
}

func produce(t *testing.T, p *producer.Producer, from, n int) {
	t.Helper()
	var recs []*producer.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &producer.Record{Topic: "t", Value: fmt.Appendf(nil, "r%d", i)})
	}
	require.NoError(t, p.ProduceSync(context.Background(), recs...).FirstErr())
}

// TestMSKIAMProducesAndRotates: a producer with MSKIAM logs in to a
// listener that verifies each AWS_MSK_IAM payload with the AWS SDK's
// signer (region from the MSK host name, session token included) and
// produces. Sessions last 2 s: the producer renews them, each time with
// the provider's current credentials, so after a rotation (the old key
// revoked) the next connection signs with the new key and producing goes
// on without an error (virtual clock).
func TestMSKIAMProducesAndRotates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newVerifier(mskHost, mskRegion)
		v.allow(key1)
		c, n := mskCluster(t, v, 2*time.Second)
		creds := &rotatingCreds{cur: key1}
		p := newProducer(t, c, n, MSKIAM(creds, UserAgent("lhaws-test")))
		produce(t, p, 0, 100)
		require.NotEmpty(t, v.accepted())
		for _, id := range v.accepted() {
			require.Equal(t, key1.AccessKeyID, id)
		}

		v.allow(key2)
		creds.set(key2)
		v.revoke(key1.AccessKeyID)
		before := len(v.accepted())
		for i := range 10 { // 5 s: at least two renewals
			produce(t, p, 100+10*i, 10)
			time.Sleep(500 * time.Millisecond)
		}
		after := v.accepted()[before:]
		require.NotEmpty(t, after, "new connections after the rotation")
		for _, id := range after {
			require.Equal(t, key2.AccessKeyID, id)
		}
		require.Len(t, c.Records("t", 0), 200)
		require.Zero(t, c.SessionsExpired(), "sessions renewed before MSK ends them")
		require.Equal(t, "lhaws-test", v.agent)
	})
}

// TestMSKIAMWrongSecretFailsFast: a wrong secret key is refused by the
// listener (signature mismatch) and the record fails at once with
// producer.ErrAuthentication wrapping SASL_AUTHENTICATION_FAILED, not at
// the delivery timeout.
func TestMSKIAMWrongSecretFailsFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newVerifier(mskHost, mskRegion)
		v.allow(key1)
		c, n := mskCluster(t, v, 0)
		bad := key1
		bad.SecretAccessKey = "not-the-secret"
		p := newProducer(t, c, n, MSKIAM(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return bad, nil
		})), producer.DeliveryTimeout(2*time.Minute))
		start := time.Now()
		err := p.ProduceSync(context.Background(), &producer.Record{Topic: "t", Value: []byte("x")}).FirstErr()
		require.ErrorIs(t, err, producer.ErrAuthentication)
		require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
		require.ErrorContains(t, err, "signature mismatch")
		require.NotErrorIs(t, err, producer.ErrDeliveryTimeout)
		require.Less(t, time.Since(start), 10*time.Second)
		require.Empty(t, v.accepted())
		require.Empty(t, c.Records("t", 0))
	})
}

// TestVerifierRejectsTampering is the verifier's negative control: a
// payload it accepts is refused once any signed part changes, so the
// tests above would catch a wrong signature.
func TestVerifierRejectsTampering(t *testing.T) {
	v := newVerifier(mskHost, mskRegion)
	v.allow(key1)
	_, msg, err := Mechanism(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return key1, nil
	})).Authenticate(context.Background(), mskHost+":9098")
	require.NoError(t, err)
	require.NoError(t, v.verify(msg))
	require.True(t, strings.HasPrefix(v.agent, "franz-go/"), "default user agent %q", v.agent)
	for field, val := range map[string]string{
		"x-amz-signature":      strings.Repeat("0", 64),
		"x-amz-security-token": "other-token",
		"host":                 "b-2.longhaul.abc123.c2.kafka.us-east-1.amazonaws.com",
		"x-amz-date":           time.Now().UTC().Add(-time.Minute).Format("20060102T150405Z"),
	} {
		var kv map[string]string
		require.NoError(t, json.Unmarshal(msg, &kv))
		kv[field] = val
		bad, err := json.Marshal(kv)
		require.NoError(t, err)
		require.Error(t, v.verify(bad), "tampered %s accepted", field)
	}
}

// TestRegionFromEnvironment: for a host name without a region the region
// comes from AWS_REGION, then AWS_DEFAULT_REGION; with neither,
// authenticating fails with an error naming the host.
func TestRegionFromEnvironment(t *testing.T) {
	mech := Mechanism(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return key2, nil }))
	for _, tc := range []struct{ env, region string }{{"AWS_REGION", "eu-west-1"}, {"AWS_DEFAULT_REGION", "ap-south-1"}} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv("AWS_REGION", "")
			t.Setenv("AWS_DEFAULT_REGION", "")
			t.Setenv(tc.env, tc.region)
			v := newVerifier("10.1.2.3", tc.region)
			v.allow(key2)
			_, msg, err := mech.Authenticate(context.Background(), "10.1.2.3:9098")
			require.NoError(t, err)
			require.NoError(t, v.verify(msg))
		})
	}
	t.Run("none", func(t *testing.T) {
		t.Setenv("AWS_REGION", "")
		t.Setenv("AWS_DEFAULT_REGION", "")
		_, _, err := mech.Authenticate(context.Background(), "10.1.2.3:9098")
		require.ErrorContains(t, err, "10.1.2.3")
	})
}

// TestProviderErrorAndNil: a provider error is returned by the mechanism
// wrapped with its cause; a nil provider panics.
func TestProviderErrorAndNil(t *testing.T) {
	boom := errors.New("no credentials in the chain")
	_, _, err := Mechanism(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{}, boom
	})).Authenticate(context.Background(), mskHost+":9098")
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, "lhaws: retrieving AWS credentials")
	require.PanicsWithValue(t, "lhaws: nil credentials provider", func() { MSKIAM(nil) })
}
