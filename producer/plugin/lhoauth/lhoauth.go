// Package lhoauth authenticates a longhaul producer with OAUTHBEARER
// tokens fetched by the OAuth 2 client credentials grant, configured by
// the Java properties a Kafka client config carries:
//
//	security.protocol=SASL_SSL
//	sasl.mechanism=OAUTHBEARER
//	sasl.oauthbearer.token.endpoint.url=https://login.example.com/oauth2/token
//	sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="my-app" clientSecret="..." scope="kafka";
//
// Pass [ClientCredentials] with those properties:
//
//	p, err := producer.NewFromProperties(props, lhoauth.ClientCredentials())
//
// It lives in its own module, so longhaul itself does not depend on
// golang.org/x/oauth2; without this option, sasl.mechanism=OAUTHBEARER
// from properties is a producer.ConfigError that names it.
package lhoauth

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/longhaul-kafka/longhaul/producer"
)

// ClientCredentials returns a producer option that, when the properties
// say security.protocol=SASL_PLAINTEXT or SASL_SSL and
// sasl.mechanism=OAUTHBEARER, logs every broker connection in with a token
// from sasl.oauthbearer.token.endpoint.url, fetched with the clientId,
// clientSecret and scope (space- or comma-separated) of sasl.jaas.config's
// OAuthBearerLoginModule. With other properties it does nothing; a
// producer.SASL option takes precedence over it.
//
// The token is cached and fetched again once it is about to expire
// (within oauth2's 10 s margin), so every new connection logs in with a
// valid one.
// Each fetch runs with the dial's context: a stalled endpoint ends with
// the dial, and Close, which waits for dials, is not held by it. Concurrent
// dials share one fetch. A missing endpoint or client credential is a
// *producer.ConfigError naming the property; a failed fetch fails that
// connection attempt, which is retried with backoff.
func ClientCredentials() producer.Opt {
	return producer.SASLFromProperties("OAUTHBEARER", func(sp producer.SASLProperties) (sasl.Mechanism, error) {
		if sp.TokenEndpointURL == "" {
			return nil, &producer.ConfigError{Property: "sasl.oauthbearer.token.endpoint.url",
				Reason: "required with sasl.mechanism=OAUTHBEARER (or pass the SASL option with oauth.Oauth from franz-go's pkg/sasl/oauth for another token source)"}
		}
		id, secret := sp.JAAS["clientId"], sp.JAAS["clientSecret"]
		if id == "" || secret == "" {
			return nil, &producer.ConfigError{Property: "sasl.jaas.config", Reason: `OAuthBearerLoginModule needs clientId="..." and clientSecret="..."`}
		}
		cc := clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: sp.TokenEndpointURL}
		if scope := sp.JAAS["scope"]; scope != "" {
			cc.Scopes = strings.Fields(strings.ReplaceAll(scope, ",", " "))
		}
		return mechanism(cc), nil
	})
}

// mechanism is OAUTHBEARER with tokens from cc, cached. The token is
// fetched with the dial's context, not a TokenSource's (fixed at creation,
// and Background here): a stalled endpoint then ends with the dial. One
// dial fetches at a time, so concurrent dials share a token; the others
// wait for it until their own context ends.
func mechanism(cc clientcredentials.Config) sasl.Mechanism {
	var (
		turn   = make(chan struct{}, 1) // held while using cached
		cached *oauth2.Token
	)
	return oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
		select {
		case turn <- struct{}{}:
		case <-ctx.Done():
			return oauth.Auth{}, fmt.Errorf("oauthbearer token from %s: %w", cc.TokenURL, ctx.Err())
		}
		defer func() { <-turn }()
		if !cached.Valid() { // nil, or expiring within oauth2's 10 s margin
			tok, err := cc.Token(ctx)
			if err != nil {
				return oauth.Auth{}, fmt.Errorf("oauthbearer token from %s: %w", cc.TokenURL, err)
			}
			cached = tok
		}
		return oauth.Auth{Token: cached.AccessToken}, nil
	})
}
