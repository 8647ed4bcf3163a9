module github.com/longhaul-kafka/longhaul/producer/plugin/lhoauth

go 1.26.0

require (
	github.com/longhaul-kafka/longhaul v0.0.0-00010101000000-000000000000
	github.com/stretchr/testify v1.12.1
	github.com/twmb/franz-go v1.22.3
	golang.org/x/oauth2 v0.38.0
)

require (
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/twmb/franz-go/pkg/kmsg v1.15.1 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)

// For development inside the repository; a release drops it and requires
// the tagged longhaul version.
replace github.com/longhaul-kafka/longhaul => ../../..
