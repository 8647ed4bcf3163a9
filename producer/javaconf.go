package producer

import (
	"fmt"
	"sort"
	"strings"
)

// This file sorts every Java client property longhaul does not implement
// (ProducerConfig, CommonClientConfigs, SslConfigs, SaslConfigs, and the
// consumer and Schema Registry names pasted with them), so a config copied
// from a Java client works, or fails saying what to do instead:
//
//   - ignoreNoEffect (ignoredProperties): a Java producer property whose setting
//     cannot change which records are written, in what order, or how safely
//     (metrics, socket tuning, JVM plumbing). Accepted, logged at Debug.
//   - ignoreNotProducer (ignoredProperties): a consumer, admin or serializer
//     property. The Java producer warns that it is unused and ignores it;
//     so does longhaul, with a Warn through the Logger option.
//   - unsupportedProperties: a Java producer property whose non-default
//     value would change what the user relies on (interceptors,
//     two-phase commit, Java classes). Its Java default is accepted; any other
//     value is a ConfigError saying what to do instead.
//
// Any other name is a ConfigError, with the closest known name suggested.

// ignoreKind says why a property is accepted without effect.
type ignoreKind int

const (
	ignoreNoEffect    ignoreKind = iota // a producer property with no effect on what is written
	ignoreNotProducer                   // a consumer, admin or serializer property
)

// ignoredProperty is a property accepted and ignored, and why.
type ignoredProperty struct {
	kind   ignoreKind
	reason string
}

func harmless(reason string) ignoredProperty { return ignoredProperty{ignoreNoEffect, reason} }

func notForProducer(reason string) ignoredProperty { return ignoredProperty{ignoreNotProducer, reason} }

const (
	whyMetrics   = "metrics go to Java's metrics registry; longhaul reports through Stats and Hooks"
	whyKerberos  = "Kerberos (GSSAPI) only; sasl.mechanism does not accept GSSAPI"
	whyLogin     = "tunes Java's login thread; lhoauth.ClientCredentials fetches and renews OAUTHBEARER tokens itself"
	whyValidate  = "token validation happens on the broker; the client only sends the token"
	whyConsumer  = "a consumer (or admin client) property; the Java producer also ignores it, with a warning"
	whySerdes    = "a serializer (Schema Registry) property; records carry bytes here, serialize them before Produce"
	whySocketBuf = "socket buffer size, a throughput hint: the OS sizes the buffers (as Java's -1)"
)

// ignoredProperties are Java client properties that are accepted and have
// no effect; the reason says why ignoring them is safe.
var ignoredProperties = map[string]ignoredProperty{
	// ProducerConfig and CommonClientConfigs.
	"key.serializer":                         harmless("records carry bytes"),
	"value.serializer":                       harmless("records carry bytes"),
	"client.dns.lookup":                      harmless("Go's dialer tries every address a name resolves to, as Java's use_all_dns_ips"),
	"send.buffer.bytes":                      harmless(whySocketBuf),
	"receive.buffer.bytes":                   harmless(whySocketBuf),
	"reconnect.backoff.ms":                   harmless("reconnects follow retry.backoff.ms and retry.backoff.max.ms"),
	"reconnect.backoff.max.ms":               harmless("reconnects follow retry.backoff.ms and retry.backoff.max.ms"),
	"socket.connection.setup.timeout.ms":     harmless("a connection attempt is bounded by request.timeout.ms"),
	"socket.connection.setup.timeout.max.ms": harmless("a connection attempt is bounded by request.timeout.ms"),
	"connections.max.idle.ms":                harmless("idle connections are kept; the broker closes them after its own connections.max.idle.ms and longhaul reconnects"),
	"metrics.sample.window.ms":               harmless(whyMetrics),
	"metrics.num.samples":                    harmless(whyMetrics),
	"metrics.recording.level":                harmless(whyMetrics),
	"metric.reporters":                       harmless(whyMetrics),
	"auto.include.jmx.reporter":              harmless(whyMetrics),

	// SslConfigs.
	"ssl.protocol":                     harmless("ssl.enabled.protocols decides the TLS versions, as in Java"),
	"ssl.keymanager.algorithm":         harmless("Java's KeyManagerFactory algorithm; Go reads the key store itself"),
	"ssl.trustmanager.algorithm":       harmless("Java's TrustManagerFactory algorithm; Go verifies certificates by PKIX itself"),
	"ssl.secure.random.implementation": harmless("Go's TLS uses crypto/rand"),

	// SaslConfigs.
	"sasl.kerberos.service.name":                          harmless(whyKerberos),
	"sasl.kerberos.kinit.cmd":                             harmless(whyKerberos),
	"sasl.kerberos.ticket.renew.window.factor":            harmless(whyKerberos),
	"sasl.kerberos.ticket.renew.jitter":                   harmless(whyKerberos),
	"sasl.kerberos.min.time.before.relogin":               harmless(whyKerberos),
	"sasl.login.refresh.window.factor":                    harmless(whyLogin),
	"sasl.login.refresh.window.jitter":                    harmless(whyLogin),
	"sasl.login.refresh.min.period.seconds":               harmless(whyLogin),
	"sasl.login.refresh.buffer.seconds":                   harmless(whyLogin),
	"sasl.login.connect.timeout.ms":                       harmless(whyLogin),
	"sasl.login.read.timeout.ms":                          harmless(whyLogin),
	"sasl.login.retry.backoff.ms":                         harmless(whyLogin),
	"sasl.login.retry.backoff.max.ms":                     harmless(whyLogin),
	"sasl.oauthbearer.scope.claim.name":                   harmless(whyValidate),
	"sasl.oauthbearer.sub.claim.name":                     harmless(whyValidate),
	"sasl.oauthbearer.jwks.endpoint.url":                  harmless(whyValidate),
	"sasl.oauthbearer.jwks.endpoint.refresh.ms":           harmless(whyValidate),
	"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms":     harmless(whyValidate),
	"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": harmless(whyValidate),
	"sasl.oauthbearer.clock.skew.seconds":                 harmless(whyValidate),
	"sasl.oauthbearer.expected.audience":                  harmless(whyValidate),
	"sasl.oauthbearer.expected.issuer":                    harmless(whyValidate),

	// Consumer properties that shared client snippets carry (Confluent
	// Cloud's has session.timeout.ms), and the consumer's CommonClientConfigs.
	"group.id":                      notForProducer(whyConsumer),
	"group.instance.id":             notForProducer(whyConsumer),
	"group.protocol":                notForProducer(whyConsumer),
	"group.remote.assignor":         notForProducer(whyConsumer),
	"session.timeout.ms":            notForProducer(whyConsumer),
	"heartbeat.interval.ms":         notForProducer(whyConsumer),
	"auto.offset.reset":             notForProducer(whyConsumer),
	"enable.auto.commit":            notForProducer(whyConsumer),
	"auto.commit.interval.ms":       notForProducer(whyConsumer),
	"partition.assignment.strategy": notForProducer(whyConsumer),
	"max.poll.records":              notForProducer(whyConsumer),
	"max.poll.interval.ms":          notForProducer(whyConsumer),
	"fetch.min.bytes":               notForProducer(whyConsumer),
	"fetch.max.bytes":               notForProducer(whyConsumer),
	"fetch.max.wait.ms":             notForProducer(whyConsumer),
	"max.partition.fetch.bytes":     notForProducer(whyConsumer),
	"isolation.level":               notForProducer(whyConsumer),
	"check.crcs":                    notForProducer(whyConsumer),
	"exclude.internal.topics":       notForProducer(whyConsumer),
	"key.deserializer":              notForProducer(whyConsumer),
	"value.deserializer":            notForProducer(whyConsumer),
	"default.api.timeout.ms":        notForProducer(whyConsumer),
	// Schema Registry settings in Confluent's client snippets.
	"schema.registry.url":                  notForProducer(whySerdes),
	"basic.auth.credentials.source":        notForProducer(whySerdes),
	"basic.auth.user.info":                 notForProducer(whySerdes),
	"schema.registry.basic.auth.user.info": notForProducer(whySerdes),
	"auto.register.schemas":                notForProducer(whySerdes),
	"use.latest.version":                   notForProducer(whySerdes),
}

// unsupportedProperty is a Java producer property longhaul cannot honour.
// Its Java default (ok) is accepted, having nothing to honour; any other
// value is a ConfigError with instead as the reason.
type unsupportedProperty struct {
	ok      func(v string) bool
	instead string
}

func emptyOK(v string) bool { return v == "" }

func equalFoldOK(want ...string) func(string) bool {
	return func(v string) bool {
		for _, w := range want {
			if strings.EqualFold(v, w) {
				return true
			}
		}
		return false
	}
}

// unsupportedProperties would change behaviour a user relies on if they
// were silently ignored.
var unsupportedProperties = map[string]unsupportedProperty{
	"transaction.two.phase.commit.enable": {equalFoldOK("false"), "two-phase commit (KIP-939) is not supported: " +
		"no Kafka release serves InitProducerId v6 as stable (Kafka 4.4 offers v0-5) and brokers answer its " +
		"keepPreparedTxn with UNSUPPORTED_VERSION; remove the property"},
	"interceptor.classes": {emptyOK, "Java interceptor classes cannot run here; wrap Produce, or use the " +
		"Hooks option to observe records and batches"},
	"security.providers": {emptyOK, "Java security providers cannot run here; give a *tls.Config with the TLS option " +
		"or a sasl.Mechanism with the SASL option"},
	"config.providers": {emptyOK, "config providers are not supported: values such as ${file:...} would be used as " +
		"written; resolve them before passing the properties"},
	"ssl.provider": {emptyOK, "Java JSSE providers cannot run here; Go's crypto/tls is used; give a *tls.Config with the TLS option to customise it"},
	"ssl.cipher.suites": {emptyOK, "not supported: Go chooses among its secure cipher suites; to restrict them give a " +
		"*tls.Config with CipherSuites through the TLS option"},
	"ssl.engine.factory.class": {emptyOK, "Java SSL engine factories cannot run here; give a *tls.Config with the TLS option"},
	"sasl.login.class":         {emptyOK, "Java login classes cannot run here; give a sasl.Mechanism with the SASL option"},
	"sasl.login.callback.handler.class": {equalFoldOK("",
		"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
		"org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler"),
		"only Java's built-in OAuthBearerLoginCallbackHandler is accepted (the lhoauth.ClientCredentials option fetches tokens from " +
			"sasl.oauthbearer.token.endpoint.url as it does); for another token source use the SASL option"},
	"sasl.oauthbearer.header.urlencode": {equalFoldOK("false"), "not supported: client credentials are sent as " +
		"written; remove the property"},
}

// propertyAliases are other spellings of a property, read as it: librdkafka
// (confluent-kafka-go) names that Confluent's snippets use. Giving both
// spellings with different values is a ConfigError.
var propertyAliases = map[string]string{
	"sasl.mechanisms": "sasl.mechanism",
}

// IgnoredProperty reports whether NewFromProperties accepts the property
// name without effect, and why. notProducer is true for a consumer, admin
// or serializer property (for example group.id or session.timeout.ms): the
// Java producer warns that those are unused, and longhaul logs a Warn
// through the Logger option for each one given. The others are Java
// producer properties whose settings cannot change what is written (for
// example client.dns.lookup or metric.reporters); they are logged at Debug.
func IgnoredProperty(name string) (reason string, notProducer bool, ok bool) {
	p, ok := ignoredProperties[name]
	if !ok {
		return "", false, false
	}
	return p.reason, p.kind == ignoreNotProducer, true
}

// knownNames lists every name setProperty recognises, for suggestions.
func knownNames() []string {
	names := PropertyNames()
	for n := range ignoredProperties {
		names = append(names, n)
	}
	for n := range unsupportedProperties {
		names = append(names, n)
	}
	for n := range propertyAliases {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// unknownReason is the ConfigError reason for a name no table knows: the
// closest known name when it is a likely typo, not the whole list.
func unknownReason(name string) string {
	const tail = "; PropertyNames lists the accepted names"
	if s := suggest(name); s != "" {
		return fmt.Sprintf("unknown property; did you mean %s?", s)
	}
	return "unknown property: not a Kafka producer property longhaul knows" + tail
}

// suggest returns the known name closest to name (case-insensitive edit
// distance), if close enough to be a typo: at most 1 edit for names up to 8
// characters, 2 up to 16, 3 beyond; ties go to the first in sorted order.
func suggest(name string) string {
	lower := strings.ToLower(strings.TrimSpace(name))
	limit := 1
	switch {
	case len(lower) > 16:
		limit = 3
	case len(lower) > 8:
		limit = 2
	}
	best, bestD := "", limit+1
	for _, k := range knownNames() {
		if d := editDistance(lower, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// logIgnored reports the ignored properties given, once per producer
// (validate runs once): Warn for properties that are not the producer's,
// Debug for the producer's own.
func (c *config) logIgnored() {
	if c.logger == nil {
		return
	}
	for _, name := range c.ignoredGiven {
		p := ignoredProperties[name]
		if p.kind == ignoreNotProducer {
			c.logger.Warn("property is not a producer property; ignored, as the Java producer does", "property", name, "reason", p.reason)
		} else {
			c.logger.Debug("Java producer property ignored: no effect here", "property", name, "reason", p.reason)
		}
	}
}
