// Package lhkrb5 authenticates a longhaul producer with Kerberos: the
// SASL mechanism GSSAPI, as Kafka brokers with
// sasl.enabled.mechanisms=GSSAPI expect it from the Java client.
//
// It lives in its own module, so longhaul itself does not depend on a
// Kerberos library. Logins, tickets and their renewal are
// github.com/jcmturner/gokrb5/v8 (pure Go: no libkrb5, no kinit); the
// SASL GSSAPI exchange on top (RFC 4752 over RFC 4121) is this package's.
//
//	k, err := lhkrb5.New(lhkrb5.Config{
//		Principal:   "app@EXAMPLE.COM",
//		KeytabFile:  "/etc/security/app.keytab", // or Password
//		ServiceName: "kafka",                    // sasl.kerberos.service.name
//	})
//	if err != nil { ... } // a wrong password or keytab fails here
//	defer k.Close()
//	p, err := producer.New(
//		producer.BootstrapServers("broker1.example.com:9092"),
//		producer.Property("security.protocol", "SASL_SSL"), // or SASL_PLAINTEXT
//		k.Option(),
//	)
//
// A Java client config (sasl.mechanism=GSSAPI, sasl.kerberos.service.name
// and a Krb5LoginModule sasl.jaas.config) converts with [FromProperties].
//
// Each broker connection asks for a service ticket for
// <ServiceName>/<broker host>@<realm> (the host of the broker's address,
// lower case; an IP address is first resolved back to its name, as the
// Java client does) and sends it in an AP-REQ without asking the broker
// to authenticate itself (the Java client's default), then negotiates no
// SASL security layer (TLS, if any, protects the connection).
//
// Renewal: New logs in (AS exchange) with the keytab or password and
// keeps the ticket-granting ticket fresh in the background, renewing it
// at 5/6 of its lifetime while it is renewable and logging in again
// after that; service tickets are cached until they expire and fetched
// again then. So producers run past any ticket lifetime, including
// brokers' periodic re-authentication (connections.max.reauth.ms),
// until [Client.Close].
package lhkrb5

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/longhaul-kafka/longhaul/producer"
)

// Config says who logs in and to which service.
type Config struct {
	// Principal is the client principal, "name@REALM" or "name" (the
	// realm is then krb5.conf's default_realm).
	Principal string
	// KeytabFile logs in with the principal's key from this keytab;
	// Password logs in with its password. Exactly one is required.
	KeytabFile string
	Password   string
	// ServiceName is the brokers' Kerberos service name, Java's
	// sasl.kerberos.service.name (usually "kafka"); required, as in Java.
	ServiceName string
	// Krb5Conf is the krb5.conf to read (realms, KDCs, encryption
	// types). Default: the first file of $KRB5_CONFIG, else
	// /etc/krb5.conf.
	Krb5Conf string
}

// Client is a logged-in Kerberos principal and the GSSAPI SASL mechanism
// that authenticates broker connections as it. It is safe for concurrent
// use by any number of producers; [Client.Close] ends its renewal.
type Client struct {
	service string
	realm   string
	kc      *client.Client
	closed  atomic.Bool
}

// New reads the krb5.conf and the keytab, logs in, and starts renewing
// the login. A wrong password, a keytab without the principal's current
// key, or an unreachable KDC is an error here, naming the principal and
// the KDC's answer.
func New(cfg Config) (*Client, error) {
	if cfg.ServiceName == "" {
		return nil, errors.New("lhkrb5: ServiceName (sasl.kerberos.service.name) is required, usually \"kafka\"")
	}
	if strings.ContainsAny(cfg.ServiceName, "/@") {
		return nil, fmt.Errorf("lhkrb5: ServiceName %q: want a service name alone, such as \"kafka\"", cfg.ServiceName)
	}
	if (cfg.KeytabFile == "") == (cfg.Password == "") {
		return nil, errors.New("lhkrb5: exactly one of KeytabFile and Password is required")
	}
	confPath := cfg.Krb5Conf
	if confPath == "" {
		confPath = "/etc/krb5.conf"
		if env := os.Getenv("KRB5_CONFIG"); env != "" {
			confPath = filepath.SplitList(env)[0]
		}
	}
	conf, err := config.Load(confPath)
	if err != nil {
		return nil, fmt.Errorf("lhkrb5: krb5.conf %s: %w", confPath, err)
	}
	name, realm, _ := strings.Cut(cfg.Principal, "@")
	if realm == "" {
		realm = conf.LibDefaults.DefaultRealm
	}
	if name == "" || realm == "" {
		return nil, fmt.Errorf("lhkrb5: Principal %q: want name@REALM (or a default_realm in %s)", cfg.Principal, confPath)
	}
	settings := client.DisablePAFXFAST(true)
	var kc *client.Client
	how := "password"
	if cfg.KeytabFile != "" {
		kt, err := keytab.Load(cfg.KeytabFile)
		if err != nil {
			return nil, fmt.Errorf("lhkrb5: keytab %s: %w", cfg.KeytabFile, err)
		}
		kc = client.NewWithKeytab(name, realm, kt, conf, settings)
		how = "keytab " + cfg.KeytabFile
	} else {
		kc = client.NewWithPassword(name, realm, cfg.Password, conf, settings)
	}
	if err := kc.Login(); err != nil {
		kc.Destroy()
		return nil, fmt.Errorf("lhkrb5: login as %s@%s with %s: %w", name, realm, how, err)
	}
	return &Client{service: cfg.ServiceName, realm: realm, kc: kc}, nil
}

// Option returns the producer option that authenticates every broker
// connection with this client (it replaces any other SASL mechanism, as
// [producer.SASL] does). Combine it with security.protocol SASL_PLAINTEXT
// or SASL_SSL.
func (c *Client) Option() producer.Opt { return producer.SASL(c) }

// Close stops renewing the login and forgets its tickets; connections
// authenticated later fail. Close the producers using it first.
func (c *Client) Close() {
	if c.closed.CompareAndSwap(false, true) {
		c.kc.Destroy()
	}
}

// Name implements franz-go's sasl.Mechanism: "GSSAPI".
func (c *Client) Name() string { return "GSSAPI" }

// Authenticate implements franz-go's sasl.Mechanism for the broker at
// hostport: it gets a service ticket (from the cache, else from the KDC,
// given up when ctx ends) and returns the session and the first message.
func (c *Client) Authenticate(ctx context.Context, hostport string) (sasl.Session, []byte, error) {
	if c.closed.Load() {
		return nil, nil, errors.New("lhkrb5: client closed")
	}
	host, err := serviceHost(ctx, hostport)
	if err != nil {
		return nil, nil, err
	}
	spn := c.service + "/" + host
	type answer struct {
		ticket messages.Ticket
		key    types.EncryptionKey
		err    error
	}
	// gokrb5 takes no context; its KDC exchanges have their own
	// timeouts, after which this goroutine ends.
	ch := make(chan answer, 1)
	go func() {
		t, k, err := c.kc.GetServiceTicket(spn)
		ch <- answer{t, k, err}
	}()
	var a answer
	select {
	case a = <-ch:
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("lhkrb5: service ticket for %s: %w", spn, ctx.Err())
	}
	if a.err != nil {
		return nil, nil, fmt.Errorf("lhkrb5: service ticket for %s@%s: %w", spn, c.realm, a.err)
	}
	tok, err := initialToken(c.kc.Credentials.Domain(), c.kc.Credentials.CName(), a.ticket, a.key)
	if err != nil {
		return nil, nil, fmt.Errorf("lhkrb5: AP-REQ for %s: %w", spn, err)
	}
	return &session{key: a.key}, tok, nil
}

// serviceHost is the host part of the service principal for the broker
// at hostport: its host in lower case, an IP address resolved back to
// its first name (the IP itself if it has none).
func serviceHost(ctx context.Context, hostport string) (string, error) {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if host == "" {
		return "", fmt.Errorf("lhkrb5: broker address %q has no host", hostport)
	}
	if _, err := netip.ParseAddr(host); err == nil {
		if names, err := net.DefaultResolver.LookupAddr(ctx, host); err == nil && len(names) > 0 {
			host = strings.TrimSuffix(names[0], ".")
		}
	}
	return strings.ToLower(host), nil
}

var _ sasl.Mechanism = (*Client)(nil)
