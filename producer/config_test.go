package producer

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
	"time"
)

func TestDefaultsComeFromTable(t *testing.T) {
	c := defaultConfig()
	want := map[string]any{
		"batch.size":                            16384,
		"linger.ms":                             5 * time.Millisecond,
		"buffer.memory":                         int64(33554432),
		"max.request.size":                      1048576,
		"delivery.timeout.ms":                   120 * time.Second,
		"request.timeout.ms":                    30 * time.Second,
		"max.in.flight.requests.per.connection": 5,
		"metadata.max.age.ms":                   5 * time.Minute,
		"max.block.ms":                          60 * time.Second,
		"allow.auto.create.topics":              true,
	}
	got := map[string]any{
		"batch.size":                            c.batchSize,
		"linger.ms":                             c.linger,
		"buffer.memory":                         c.bufferMemory,
		"max.request.size":                      c.maxRequestSize,
		"delivery.timeout.ms":                   c.deliveryTimeout,
		"request.timeout.ms":                    c.requestTimeout,
		"max.in.flight.requests.per.connection": c.maxInFlightPerConn,
		"metadata.max.age.ms":                   c.metadataMaxAge,
		"max.block.ms":                          c.maxBlock,
		"allow.auto.create.topics":              c.autoCreateTopics,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s default = %v, want %v (Kafka's)", k, got[k], v)
		}
	}
}

func TestInvalidConfigNamesProperty(t *testing.T) {
	cases := []struct {
		props  map[string]string
		prop   string
		range_ string
	}{
		{map[string]string{"batch.size": "-1"}, "batch.size", "between 0 and"},
		{map[string]string{"batch.size": "lots"}, "batch.size", "integer"},
		{map[string]string{"max.in.flight.requests.per.connection": "0"}, "max.in.flight.requests.per.connection", "between 1 and"},
		{map[string]string{"acks": "1"}, "acks", "set acks=all"},
		{map[string]string{"acks": "1"}, "acks", "leader change can lose acknowledged records"},
		{map[string]string{"acks": "0"}, "acks", "kgo or the Java producer"},
		{map[string]string{"enable.idempotence": "false"}, "enable.idempotence", "set it to true"},
		{map[string]string{"enable.idempotence": "false"}, "enable.idempotence", "kgo or the Java producer"},
		{map[string]string{"retries": "0"}, "retries", "delivery.timeout.ms"},
		{map[string]string{"retries": "3"}, "retries", "only the default, 2147483647"},
		{map[string]string{"max.block.ms": "-1"}, "max.block.ms", "between 0 and"},
		{map[string]string{"allow.auto.create.topics": "maybe"}, "allow.auto.create.topics", "true or false"},
		{map[string]string{"compression.type": "brotli"}, "compression.type", "zstd"},
		{map[string]string{"linger.ms": "-1"}, "linger.ms", "between 0 and"},
		{map[string]string{"no.such.property": "1"}, "no.such.property", "unknown property"},
		{map[string]string{"bootstrap.servers": "nohostport"}, "bootstrap.servers", "host:port"},
		{map[string]string{}, "bootstrap.servers", "required"},
		{map[string]string{"delivery.timeout.ms": "100"}, "delivery.timeout.ms", "linger.ms + request.timeout.ms"},
	}
	for _, tc := range cases {
		props := map[string]string{"bootstrap.servers": "127.0.0.1:1"}
		if tc.prop == "bootstrap.servers" {
			delete(props, "bootstrap.servers")
		}
		for k, v := range tc.props {
			props[k] = v
		}
		_, err := NewFromProperties(props)
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%v: got %v, want a *ConfigError", tc.props, err)
			continue
		}
		if ce.Property != tc.prop || !strings.Contains(err.Error(), tc.range_) {
			t.Errorf("%v: error %q should name %s and say %q", tc.props, err, tc.prop, tc.range_)
		}
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%v: %v does not unwrap to ErrInvalidConfig", tc.props, err)
		}
	}
}

func TestAboveFiveInFlightAcceptedWithIdempotence(t *testing.T) {
	p, err := NewFromProperties(map[string]string{
		"bootstrap.servers":                     "127.0.0.1:1",
		"enable.idempotence":                    "true",
		"acks":                                  "all",
		"max.in.flight.requests.per.connection": "200",
		"key.serializer":                        "org.apache.kafka.common.serialization.ByteArraySerializer",
	})
	if err != nil {
		t.Fatalf("max.in.flight 200 with idempotence: %v", err)
	}
	if p.cfg.maxInFlightPerConn != 200 {
		t.Errorf("maxInFlightPerConn = %d", p.cfg.maxInFlightPerConn)
	}
	p.Close(t.Context())
}

func TestOptionsAndPropertiesAgree(t *testing.T) {
	a, err := New(BootstrapServers("h:1"), BatchSize(1000), Linger(7*time.Millisecond), MaxInFlightRequestsPerConnection(9), Compression("lz4"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(t.Context())
	b, err := NewFromProperties(map[string]string{"bootstrap.servers": "h:1", "batch.size": "1000", "linger.ms": "7",
		"max.in.flight.requests.per.connection": "9", "compression.type": "lz4"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(t.Context())
	ca, cb := a.cfg, b.cfg
	ca.logger, cb.logger = nil, nil
	if ca.batchSize != cb.batchSize || ca.linger != cb.linger || ca.maxInFlightPerConn != cb.maxInFlightPerConn || ca.compression != cb.compression {
		t.Errorf("option and property configs differ: %+v vs %+v", ca, cb)
	}
	if _, err := New(BootstrapServers("h:1"), BatchSize(-1)); err == nil {
		t.Error("BatchSize(-1) accepted; typed options must be checked like properties")
	}
}

// TestOptionDocsMatchTable keeps option docs from drifting from the table
// (franz-go's Acks doc once named the wrong default): every option that
// writes a property names it and states the table's default, and names
// itself in its errors. An option writes a property either as text
// (propOpt{name: ...}) or as a typed value through a typed row
// (xValue.option("Name", v), xValue declared in config.go with its name).
func TestOptionDocsMatchTable(t *testing.T) {
	fset := token.NewFileSet()
	rows := map[string]string{} // typed row variable -> property
	cf, err := parser.ParseFile(fset, "config.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(cf, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Names) == 1 && len(vs.Values) == 1 {
			if call, ok := vs.Values[0].(*ast.CallExpr); ok && len(call.Args) > 0 {
				if id, ok := call.Fun.(*ast.Ident); ok && (id.Name == "intValue" || id.Name == "durationValue") {
					if bl, ok := call.Args[0].(*ast.BasicLit); ok {
						rows[vs.Names[0].Name] = strings.Trim(bl.Value, `"`)
					}
				}
			}
		}
		return true
	})
	if len(rows) < 10 {
		t.Fatalf("only %d typed rows found in config.go; the parser missed them", len(rows))
	}
	f, err := parser.ParseFile(fset, "options.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || !fn.Name.IsExported() || fn.Name.Name == "Property" {
			continue
		}
		var prop, option string
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				if id, ok := n.Type.(*ast.Ident); !ok || id.Name != "propOpt" {
					return true
				}
				for _, e := range n.Elts {
					kv, ok := e.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					bl, ok := kv.Value.(*ast.BasicLit)
					if !ok {
						continue
					}
					switch kv.Key.(*ast.Ident).Name {
					case "name":
						prop = strings.Trim(bl.Value, `"`)
					case "option":
						option = strings.Trim(bl.Value, `"`)
					}
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "option" || len(n.Args) != 2 {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok {
					if prop = rows[x.Name]; prop == "" {
						t.Errorf("%s sets %s, which is not a typed row of config.go", fn.Name.Name, x.Name)
					}
				}
				if bl, ok := n.Args[0].(*ast.BasicLit); ok {
					option = strings.Trim(bl.Value, `"`)
				}
			}
			return true
		})
		if prop == "" {
			continue
		}
		if option != fn.Name.Name {
			t.Errorf("%s names itself %q in its errors", fn.Name.Name, option)
		}
		doc := fn.Doc.Text()
		def, ok := PropertyDefault(prop)
		if !ok {
			t.Errorf("%s writes unknown property %s", fn.Name.Name, prop)
			continue
		}
		if !strings.Contains(doc, prop) {
			t.Errorf("%s doc does not name its property %s", fn.Name.Name, prop)
		}
		if def != "" && !docStatesDefault(doc, prop, def) {
			t.Errorf("%s doc does not state the default %s=%s: %q", fn.Name.Name, prop, def, doc)
		}
		checked++
	}
	if checked < 17 {
		t.Fatalf("only %d options checked; the parser missed them", checked)
	}
}

func docStatesDefault(doc, prop, def string) bool {
	i := strings.Index(doc, "Default")
	if i < 0 {
		return false
	}
	rest := doc[i:]
	if strings.Contains(rest, def) {
		return true
	}
	if strings.HasSuffix(prop, ".ms") {
		d, err := time.ParseDuration(def + "ms")
		if err != nil {
			return false
		}
		forms := []string{d.String(), fmt.Sprintf("%ds", d/time.Second), fmt.Sprintf("%dms", d/time.Millisecond)}
		if d%time.Minute == 0 {
			forms = append(forms, fmt.Sprintf("%d minutes", d/time.Minute))
		}
		for _, form := range forms {
			if form != "" && strings.Contains(rest, form) {
				return true
			}
		}
	}
	return (def == "0" || def == "none") && strings.Contains(rest, def)
}

func TestSecurityPropertiesFromJavaConfig(t *testing.T) {
	p, err := NewFromProperties(map[string]string{
		"bootstrap.servers": "h:9093",
		"security.protocol": "SASL_SSL",
		"sasl.mechanism":    "SCRAM-SHA-512",
		"sasl.jaas.config":  `org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="s3\"cret";`,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(t.Context())
	if p.cfg.tls == nil || p.cfg.sasl == nil || p.cfg.sasl.Name() != "SCRAM-SHA-512" {
		t.Fatalf("tls=%v sasl=%v", p.cfg.tls, p.cfg.sasl)
	}
	if p.cfg.jaas["username"] != "alice" || p.cfg.jaas["password"] != `s3"cret` {
		t.Errorf("jaas parsed as %q", p.cfg.jaas)
	}
	_, err = NewFromProperties(map[string]string{"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT"})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Property != "sasl.jaas.config" {
		t.Errorf("SASL without credentials: %v", err)
	}
	plainOnly, err := NewFromProperties(map[string]string{"bootstrap.servers": "h:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer plainOnly.Close(t.Context())
	if plainOnly.cfg.tls != nil || plainOnly.cfg.sasl != nil {
		t.Error("PLAINTEXT default turned on TLS or SASL")
	}
}

func TestPropertyNamesSortedAndDocumented(t *testing.T) {
	names := PropertyNames()
	for i, n := range names {
		if i > 0 && names[i-1] >= n {
			t.Errorf("not sorted at %s", n)
		}
		if PropertyDoc(n) == "" {
			t.Errorf("%s has no doc", n)
		}
	}
}
