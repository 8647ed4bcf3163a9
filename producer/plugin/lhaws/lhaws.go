// Package lhaws authenticates a longhaul producer to Amazon MSK with IAM
// access control: the SASL mechanism AWS_MSK_IAM, signed with credentials
// from an aws-sdk-go-v2 [aws.CredentialsProvider].
//
// It lives in its own module, so longhaul itself does not depend on the
// AWS SDK. The signing is franz-go's pkg/sasl/aws (no SDK needed); this
// package feeds it the SDK's credentials, so every credential source the
// SDK knows works (environment, shared profiles, SSO, IRSA/web identity,
// ECS and EC2 instance roles, assumed roles).
//
//	cfg, err := config.LoadDefaultConfig(ctx) // github.com/aws/aws-sdk-go-v2/config
//	if err != nil { ... }
//	p, err := producer.New(
//		producer.BootstrapServers("b-1.mycluster.abc123.c2.kafka.us-east-1.amazonaws.com:9098"),
//		producer.Property("security.protocol", "SASL_SSL"), // MSK's IAM listener (port 9098) is TLS
//		lhaws.MSKIAM(cfg.Credentials),
//	)
//
// Region and host: each connection signs a request for the broker's host
// name, valid 15 minutes, in the region named in that host name (MSK
// broker and bootstrap names end in .kafka.<region>.amazonaws.com, VPC
// endpoint names carry it too); for a host name without a region (an IP
// address, a custom DNS name) the region comes from AWS_REGION or
// AWS_DEFAULT_REGION, and connecting fails if neither is set. MSK checks
// the signed host, so use the broker names MSK hands out.
//
// Credentials are retrieved for every new connection (a reconnect, or a
// session renewal: MSK ends a session when its credentials expire, and the
// producer renews it before then, see producer.ErrSessionRenewal), so
// rotated credentials are used from the next connection on. The provider
// should cache: aws.Config.Credentials from config.LoadDefaultConfig does;
// wrap another one in aws.NewCredentialsCache. A provider error fails that
// connection attempt and is retried with backoff; credentials MSK rejects
// fail the records waiting for the connection at once with
// producer.ErrAuthentication.
package lhaws

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/twmb/franz-go/pkg/sasl"
	saslaws "github.com/twmb/franz-go/pkg/sasl/aws"

	"github.com/longhaul-kafka/longhaul/producer"
)

// Option configures [MSKIAM] and [Mechanism].
type Option func(*options)

type options struct {
	userAgent string
}

// UserAgent sets the user agent sent to MSK with each authentication,
// which IAM policies can match with the aws:UserAgent condition key.
// Default: franz-go's "franz-go/<Go version>/<host name>".
func UserAgent(ua string) Option { return func(o *options) { o.userAgent = ua } }

// MSKIAM returns a producer option that authenticates every broker
// connection with AWS_MSK_IAM, signing with credentials from creds (see
// the package doc for regions and rotation). It replaces any other SASL
// mechanism, as [producer.SASL] does; combine it with TLS
// (security.protocol=SASL_SSL or [producer.TLS]). It panics if creds is
// nil.
func MSKIAM(creds aws.CredentialsProvider, opts ...Option) producer.Opt {
	return producer.SASL(Mechanism(creds, opts...))
}

// Mechanism returns the AWS_MSK_IAM SASL mechanism of [MSKIAM], for
// clients that take a franz-go sasl.Mechanism. It panics if creds is nil.
func Mechanism(creds aws.CredentialsProvider, opts ...Option) sasl.Mechanism {
	if creds == nil {
		panic("lhaws: nil credentials provider")
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return saslaws.ManagedStreamingIAM(func(ctx context.Context) (saslaws.Auth, error) {
		c, err := creds.Retrieve(ctx)
		if err != nil {
			return saslaws.Auth{}, fmt.Errorf("lhaws: retrieving AWS credentials: %w", err)
		}
		return saslaws.Auth{
			AccessKey:    c.AccessKeyID,
			SecretKey:    c.SecretAccessKey,
			SessionToken: c.SessionToken,
			UserAgent:    o.userAgent,
		}, nil
	})
}
