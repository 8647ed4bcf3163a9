package lhoauth

import (
	"bytes"
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
	"github.com/longhaul-kafka/longhaul/internal/testkit"
	"github.com/longhaul-kafka/longhaul/producer"
)

// oauthCluster starts a broker whose every listener takes OAUTHBEARER and
// accepts a login carrying token, and returns the properties of a producer
// fetching its tokens from url.
func oauthCluster(t *testing.T, token, url string) (*broker.Cluster, map[string]string) {
	c := testkit.StartCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}},
		SASL: &broker.SASLConfig{Mechanisms: []string{"OAUTHBEARER"}, Authenticate: func(_ string, msg []byte) ([]byte, error) {
			if !bytes.Contains(msg, []byte("auth=Bearer "+token)) {
				return nil, errBadToken
			}
			return nil, nil
		}}})
	return c, map[string]string{
		"bootstrap.servers":                   c.Addr(),
		"security.protocol":                   "SASL_PLAINTEXT",
		"sasl.mechanism":                      "OAUTHBEARER",
		"sasl.oauthbearer.token.endpoint.url": url,
		"sasl.jaas.config":                    `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="id" clientSecret="s";`,
		"linger.ms":                           "1",
	}
}

type tokenError string

func (e tokenError) Error() string { return string(e) }

const errBadToken = tokenError("bad token")

// TestOAuthTokenFetchedOnceAndCached: with ClientCredentials and
// sasl.oauthbearer.token.endpoint.url every connection logs in with a token from the endpoint (client
// credentials grant), and the token is cached: the control connection and
// the broker connection share one fetch.
func TestOAuthTokenFetchedOnceAndCached(t *testing.T) {
	var fetches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"access_token":"tok-1","token_type":"Bearer","expires_in":3600}`))
	}))
	defer srv.Close()
	_, props := oauthCluster(t, "tok-1", srv.URL)
	p, err := producer.NewFromProperties(props, ClientCredentials())
	require.NoError(t, err)
	defer p.Close(context.Background())

	require.NoError(t, p.ProduceSync(context.Background(), &producer.Record{Topic: "t", Value: []byte("v")}).FirstErr())
	require.Equal(t, int32(1), fetches.Load())
}

// TestCloseDoesNotWaitForStalledTokenEndpoint: Close's doc bounds its wait
// by its ctx. A token endpoint that accepts the request and never answers
// held the dial goroutine (the token was fetched under
// context.Background, with http.DefaultClient's lack of a timeout), and
// Close waited for that goroutine for as long as the endpoint stalled.
// The fetch now ends with the dial's context.
func TestCloseDoesNotWaitForStalledTokenEndpoint(t *testing.T) {
	var (
		hit     = make(chan struct{})
		once    sync.Once
		release = make(chan struct{})
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(hit) })
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	// Runs before srv.Close, which waits for the stalled handler.
	defer srv.Close()
	defer close(release)
	_, props := oauthCluster(t, "tok-1", srv.URL)
	p, err := producer.NewFromProperties(props, ClientCredentials())
	require.NoError(t, err)

	var (
		mu     sync.Mutex
		outErr error
		called bool
	)
	p.Produce(context.Background(), &producer.Record{Topic: "t", Value: []byte("v")}, func(_ *producer.Record, err error) {
		mu.Lock()
		outErr, called = err, true
		mu.Unlock()
	})
	select {
	case <-hit:
	case <-time.After(30 * time.Second):
		t.Fatal("the producer never asked the token endpoint")
	}

	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		closed <- p.Close(ctx)
	}()
	select {
	case err := <-closed:
		require.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(30 * time.Second):
		t.Fatal("Close is still waiting for the stalled token endpoint")
	}
	mu.Lock()
	defer mu.Unlock()
	require.True(t, called, "Close returned before the record's callback ran")
	assert.ErrorIs(t, outErr, producer.ErrClosed)
}

// tokenEndpoint answers each request with the next of answers (HTTP
// status and body; the last one repeats) and counts the requests.
func tokenEndpoint(t *testing.T, answers ...[2]string) (url string, fetches *atomic.Int32) {
	fetches = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(fetches.Add(1)) - 1
		a := answers[min(n, len(answers)-1)]
		w.Header().Set("Content-Type", "application/json")
		if a[0] != "200" {
			w.WriteHeader(http.StatusInternalServerError)
		}
		w.Write([]byte(a[1]))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, fetches
}

// TestOAuthTokenFetchedAgainWhenExpiring: a token that expires within
// oauth2's 10 s margin is not reused: the next connection fetches a new
// one, so no connection logs in with an expired token.
func TestOAuthTokenFetchedAgainWhenExpiring(t *testing.T) {
	url, fetches := tokenEndpoint(t, [2]string{"200", `{"access_token":"tok-1","token_type":"Bearer","expires_in":5}`})
	_, props := oauthCluster(t, "tok-1", url)
	p, err := producer.NewFromProperties(props, ClientCredentials())
	require.NoError(t, err)
	defer p.Close(context.Background())
	require.NoError(t, p.ProduceSync(context.Background(), &producer.Record{Topic: "t", Value: []byte("v")}).FirstErr())
	// The control connection and the broker connection each fetched.
	require.GreaterOrEqual(t, fetches.Load(), int32(2))
}

// TestOAuthFailedFetchIsRetried: a token endpoint that fails fails that
// connection attempt only; the retry fetches again and the record is
// delivered.
func TestOAuthFailedFetchIsRetried(t *testing.T) {
	url, fetches := tokenEndpoint(t,
		[2]string{"500", `{"error":"temporarily_unavailable"}`},
		[2]string{"200", `{"access_token":"tok-1","token_type":"Bearer","expires_in":3600}`})
	_, props := oauthCluster(t, "tok-1", url)
	props["retry.backoff.ms"] = "10"
	p, err := producer.NewFromProperties(props, ClientCredentials())
	require.NoError(t, err)
	defer p.Close(context.Background())
	require.NoError(t, p.ProduceSync(context.Background(), &producer.Record{Topic: "t", Value: []byte("v")}).FirstErr())
	require.GreaterOrEqual(t, fetches.Load(), int32(2))
}

// TestOAuthBearerPropertiesBadInput: without a token endpoint, or without
// clientId and clientSecret, ClientCredentials fails New with a
// ConfigError naming the property to fix.
func TestOAuthBearerPropertiesBadInput(t *testing.T) {
	base := map[string]string{
		"bootstrap.servers":                   "127.0.0.1:1",
		"security.protocol":                   "SASL_SSL",
		"sasl.mechanism":                      "OAUTHBEARER",
		"sasl.oauthbearer.token.endpoint.url": "https://login.example.com/token",
		"sasl.jaas.config":                    `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="id" clientSecret="s" scope="kafka";`,
	}
	p, err := producer.NewFromProperties(base, ClientCredentials())
	require.NoError(t, err)
	closeSoon(p)
	for prop, v := range map[string]string{
		"sasl.oauthbearer.token.endpoint.url": "",
		"sasl.jaas.config":                    `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="id";`,
	} {
		m := maps.Clone(base)
		m[prop] = v
		_, err := producer.NewFromProperties(m, ClientCredentials())
		var ce *producer.ConfigError
		require.ErrorAs(t, err, &ce, prop)
		assert.Equal(t, prop, ce.Property)
	}
}

// TestClientCredentialsLeavesOtherMechanisms: with sasl.mechanism=PLAIN
// the option does nothing: the producer logs in with PLAIN, never asking
// the token endpoint.
func TestClientCredentialsLeavesOtherMechanisms(t *testing.T) {
	url, fetches := tokenEndpoint(t, [2]string{"200", `{"access_token":"tok-1","token_type":"Bearer","expires_in":3600}`})
	c := testkit.StartCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}},
		SASL: &broker.SASLConfig{Mechanisms: []string{"PLAIN"}, Authenticate: func(_ string, msg []byte) ([]byte, error) {
			if !bytes.Equal(msg, []byte("\x00u\x00p")) {
				return nil, errBadToken
			}
			return nil, nil
		}}})
	p, err := producer.NewFromProperties(map[string]string{
		"bootstrap.servers":                   c.Addr(),
		"security.protocol":                   "SASL_PLAINTEXT",
		"sasl.mechanism":                      "PLAIN",
		"sasl.oauthbearer.token.endpoint.url": url,
		"sasl.jaas.config":                    `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";`,
		"linger.ms":                           "1",
	}, ClientCredentials())
	require.NoError(t, err)
	defer p.Close(context.Background())
	require.NoError(t, p.ProduceSync(context.Background(), &producer.Record{Topic: "t", Value: []byte("v")}).FirstErr())
	require.Zero(t, fetches.Load())
}

// closeSoon closes p, giving up on flushing after a few seconds.
func closeSoon(p *producer.Producer) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p.Close(ctx)
}
