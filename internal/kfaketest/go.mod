module github.com/longhaul-kafka/longhaul/internal/kfaketest

go 1.26.0

// Test-only module; it builds against the producer in this repository.
replace github.com/longhaul-kafka/longhaul => ../..

require (
	github.com/longhaul-kafka/longhaul v0.0.0-00010101000000-000000000000
	github.com/stretchr/testify v1.12.1
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
)

require (
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/crypto v0.51.0 // indirect
	golang.org/x/oauth2 v0.38.0 // indirect
	software.sslmate.com/src/go-pkcs12 v0.7.4 // indirect
)
