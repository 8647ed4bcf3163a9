package producer_test

// The ssl.*, OAUTHBEARER and MSK IAM properties have no typed options of their own:
// the TLS and SASL options take a whole tls.Config or sasl.Mechanism. Listed here, not in example_test.go's
// table, so the README check knows what to print for them.
func init() {
	for _, name := range []string{
		"ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
		"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.keystore.certificate.chain",
		"ssl.keystore.key", "ssl.key.password", "ssl.endpoint.identification.algorithm", "ssl.enabled.protocols",
	} {
		propertyOnly[name] = "`Property`, or `TLS`"
	}
	propertyOnly["sasl.oauthbearer.token.endpoint.url"] = "`Property` with `lhoauth.ClientCredentials`, or `SASL`"
	propertyOnly["sasl.client.callback.handler.class"] = "`Property` (MSK IAM: `lhaws.MSKIAM`)"
}
