package protocol

import (
	"context"
	"crypto/tls"

	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-kafka/longhaul/internal/testcerts"
)

// TestDialCancelAfterTLSHandshake: cancelling Dial's ctx after the TLS
// handshake, while the broker has not answered ApiVersions, ends the dial
// with the ctx error. Under -race it also checks that the cancel callback
// does not read the connection variable the handshake replaced with the
// TLS conn (a data race found by CI in TestSecurity at producer shutdown).
func TestDialCancelAfterTLSHandshake(t *testing.T) {
	ca, err := testcerts.NewCA("dial-test")
	require.NoError(t, err)
	leaf, err := ca.Issue(testcerts.LeafOptions{CommonName: "broker", Hosts: []string{"127.0.0.1"}})
	require.NoError(t, err)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{leaf.TLSCertificate()}})
	require.NoError(t, err)
	defer ln.Close()
	handshook := make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if c.(*tls.Conn).Handshake() == nil {
			close(handshook)
		}
		buf := make([]byte, 4096)
		for { // read the ApiVersions request and never answer
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	}()

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-handshook
		time.Sleep(20 * time.Millisecond) // let Dial move on to ApiVersions
		cancel()
	}()
	_, err = Dial(ctx, ln.Addr().String(), DialConfig{TLS: &tls.Config{RootCAs: ca.Pool()}})
	require.Error(t, err)
	require.ErrorIs(t, err, context.Canceled)
}
