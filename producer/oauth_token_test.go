package producer

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/broker"
)

// oauthCluster starts a broker whose every listener takes OAUTHBEARER and
// accepts a login carrying token, and returns the properties of a producer
// fetching its tokens from url.
func oauthCluster(t *testing.T, token, url string) (*broker.Cluster, map[string]string) {
	c := startCluster(t, broker.Config{Topics: []broker.TopicConfig{{Name: "t", Partitions: 1}},
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

// TestOAuthTokenFetchedOnceAndCached: with sasl.oauthbearer.token.endpoint.url
// every connection logs in with a token from the endpoint (client
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
	p, err := NewFromProperties(props)
	require.NoError(t, err)
	defer p.Close(context.Background())

	require.NoError(t, p.ProduceSync(context.Background(), &Record{Topic: "t", Value: []byte("v")}).FirstErr())
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
	p, err := NewFromProperties(props)
	require.NoError(t, err)

	var (
		mu     sync.Mutex
		outErr error
		called bool
	)
	p.Produce(context.Background(), &Record{Topic: "t", Value: []byte("v")}, func(_ *Record, err error) {
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
	assert.ErrorIs(t, outErr, ErrClosed)
}
