package lhkrb5

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// krb5LoginModule is the Java login module of a Kerberos JAAS config.
const krb5LoginModule = "com.sun.security.auth.module.Krb5LoginModule"

// FromProperties reads the Kerberos part of a Java client config and
// returns the [Config] it describes and the other properties, for
// producer.Property; the core producer refuses sasl.mechanism=GSSAPI,
// so the Kerberos properties must not reach it:
//
//	cfg, rest, err := lhkrb5.FromProperties(props)
//	k, err := lhkrb5.New(cfg)
//	opts := []producer.Opt{k.Option()}
//	for name, v := range rest {
//		opts = append(opts, producer.Property(name, v))
//	}
//
// It reads:
//   - sasl.mechanism: GSSAPI, or absent (Java's default is GSSAPI).
//   - sasl.kerberos.service.name, else the JAAS option serviceName; one is
//     required, as in Java.
//   - sasl.jaas.config: com.sun.security.auth.module.Krb5LoginModule with
//     useKeyTab=true, keyTab="..." and principal="..."; storeKey,
//     doNotPrompt, refreshKrb5Config, isInitiator and debug are accepted
//     and change nothing; useTicketCache=true is an error (a ticket cache
//     cannot log in again when its ticket ends: use a keytab, or
//     Config.Password). Other options are ignored, as Java ignores them.
//     The value is a login module, a flag and key=value options ending in
//     ';', values bare or in double or single quotes (with backslash
//     escapes); comments are not supported.
//   - sasl.kerberos.kinit.cmd, sasl.kerberos.ticket.renew.window.factor,
//     sasl.kerberos.ticket.renew.jitter and
//     sasl.kerberos.min.time.before.relogin (Java's relogin thread):
//     accepted and dropped; renewal is at 5/6 of the ticket's lifetime
//     (see the package doc).
//
// Krb5Conf is left empty (Java reads java.security.krb5.conf; set the
// field, or KRB5_CONFIG).
func FromProperties(props map[string]string) (Config, map[string]string, error) {
	var cfg Config
	rest := maps.Clone(props)
	if rest == nil {
		rest = map[string]string{}
	}
	if m, ok := props["sasl.mechanism"]; ok && !strings.EqualFold(strings.TrimSpace(m), "GSSAPI") {
		return cfg, nil, fmt.Errorf("lhkrb5: sasl.mechanism %q: want GSSAPI", m)
	}
	delete(rest, "sasl.mechanism")
	for name := range props {
		if strings.HasPrefix(name, "sasl.kerberos.") {
			delete(rest, name)
		}
	}
	jaas, ok := props["sasl.jaas.config"]
	if !ok || strings.TrimSpace(jaas) == "" {
		return cfg, nil, errors.New(`lhkrb5: sasl.jaas.config is required: ` + krb5LoginModule + ` required useKeyTab=true keyTab="..." principal="...";`)
	}
	delete(rest, "sasl.jaas.config")
	module, opts, err := parseJAAS(jaas)
	if err != nil {
		return cfg, nil, fmt.Errorf("lhkrb5: sasl.jaas.config: %w", err)
	}
	if module != krb5LoginModule {
		return cfg, nil, fmt.Errorf("lhkrb5: sasl.jaas.config login module %s: want %s", module, krb5LoginModule)
	}
	if strings.EqualFold(opts["useTicketCache"], "true") {
		return cfg, nil, errors.New("lhkrb5: sasl.jaas.config useTicketCache=true: a ticket cache is not supported (it cannot log in again once its ticket ends); use useKeyTab=true keyTab=\"...\", or Config.Password")
	}
	if !strings.EqualFold(opts["useKeyTab"], "true") || opts["keyTab"] == "" {
		return cfg, nil, errors.New("lhkrb5: sasl.jaas.config needs useKeyTab=true and keyTab=\"...\" (a password login is Config.Password: Java reads it from a callback handler)")
	}
	if opts["principal"] == "" {
		return cfg, nil, errors.New("lhkrb5: sasl.jaas.config needs principal=\"name@REALM\"")
	}
	cfg.KeytabFile, cfg.Principal = opts["keyTab"], opts["principal"]
	cfg.ServiceName = strings.TrimSpace(props["sasl.kerberos.service.name"])
	if cfg.ServiceName == "" {
		cfg.ServiceName = opts["serviceName"]
	}
	if cfg.ServiceName == "" {
		return cfg, nil, errors.New("lhkrb5: sasl.kerberos.service.name is required (the brokers' Kerberos service name, usually kafka)")
	}
	return cfg, rest, nil
}

// parseJAAS reads one JAAS login module entry: "module flag [key=value]... ;".
func parseJAAS(s string) (module string, opts map[string]string, err error) {
	p := jaasParser{s: s}
	module = p.word()
	if module == "" {
		return "", nil, errors.New("login module not specified")
	}
	flag := p.word()
	if !slices.Contains([]string{"required", "requisite", "sufficient", "optional"}, strings.ToLower(flag)) {
		return "", nil, fmt.Errorf("login module %s: control flag %q, want required, requisite, sufficient or optional", module, flag)
	}
	opts = map[string]string{}
	for {
		p.space()
		if p.eof() {
			return "", nil, errors.New("missing ';' at the end")
		}
		if p.s[p.i] == ';' {
			p.i++
			p.space()
			if !p.eof() {
				return "", nil, fmt.Errorf("text after ';' at offset %d: one login module only", p.i)
			}
			return module, opts, nil
		}
		key := p.word()
		if key == "" {
			return "", nil, fmt.Errorf("option name expected at offset %d", p.i)
		}
		p.space()
		if p.eof() || p.s[p.i] != '=' {
			return "", nil, fmt.Errorf("option %s: '=' expected", key)
		}
		p.i++
		p.space()
		val, err := p.value()
		if err != nil {
			return "", nil, fmt.Errorf("option %s: %w", key, err)
		}
		opts[key] = val
	}
}

type jaasParser struct {
	s string
	i int
}

func (p *jaasParser) eof() bool { return p.i >= len(p.s) }

func (p *jaasParser) space() {
	for !p.eof() && strings.ContainsRune(" \t\r\n", rune(p.s[p.i])) {
		p.i++
	}
}

// word reads a bare word: anything up to white space, '=', ';' or a
// quote.
func (p *jaasParser) word() string {
	p.space()
	start := p.i
	for !p.eof() && !strings.ContainsRune(" \t\r\n=;\"'", rune(p.s[p.i])) {
		p.i++
	}
	return p.s[start:p.i]
}

// value reads a bare word or a quoted string with backslash escapes (\n
// and \t, else the escaped character itself).
func (p *jaasParser) value() (string, error) {
	if p.eof() {
		return "", errors.New("value expected")
	}
	q := p.s[p.i]
	if q != '"' && q != '\'' {
		w := p.word()
		if w == "" {
			return "", errors.New("value expected")
		}
		return w, nil
	}
	p.i++
	var b strings.Builder
	for !p.eof() {
		c := p.s[p.i]
		p.i++
		switch {
		case c == q:
			return b.String(), nil
		case c == '\\' && !p.eof():
			e := p.s[p.i]
			p.i++
			switch e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", errors.New("unterminated quoted string")
}
