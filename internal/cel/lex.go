package cel

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// token is one lexical element of an expression.
type token struct {
	kind string // "int", "uint", "double", "string", "ident", "eof", or the operator itself
	text string // an identifier's name or an operator
	val  any    // a literal's value
	pos  int    // byte offset in the expression
}

// lex splits src into tokens.
func lex(src string) ([]token, error) {
	var out []token
	i := 0
	for {
		for i < len(src) && strings.ContainsRune(" \t\r\n", rune(src[i])) {
			i++
		}
		if strings.HasPrefix(src[i:], "//") {
			for i < len(src) && src[i] != '\n' {
				i++
			}
			continue
		}
		if i >= len(src) {
			return append(out, token{kind: "eof", pos: i}), nil
		}
		start := i
		c := src[i]
		switch {
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			for i < len(src) && (src[i] == '_' || src[i] >= 'a' && src[i] <= 'z' || src[i] >= 'A' && src[i] <= 'Z' || src[i] >= '0' && src[i] <= '9') {
				i++
			}
			word := src[start:i]
			if (word == "r" || word == "R") && i < len(src) && (src[i] == '"' || src[i] == '\'') {
				s, n, err := lexString(src[i:], true)
				if err != nil {
					return nil, &Error{Pos: start, Msg: err.Error()}
				}
				i += n
				out = append(out, token{kind: "string", val: s, pos: start})
				continue
			}
			switch word {
			case "true", "false":
				out = append(out, token{kind: "bool", val: word == "true", pos: start})
			case "null":
				out = append(out, token{kind: "null", pos: start})
			case "in":
				out = append(out, token{kind: "in", text: "in", pos: start})
			default:
				out = append(out, token{kind: "ident", text: word, pos: start})
			}
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9':
			t, n, err := lexNumber(src[i:])
			if err != nil {
				return nil, &Error{Pos: start, Msg: err.Error()}
			}
			t.pos = start
			i += n
			out = append(out, t)
		case c == '"' || c == '\'':
			s, n, err := lexString(src[i:], false)
			if err != nil {
				return nil, &Error{Pos: start, Msg: err.Error()}
			}
			i += n
			out = append(out, token{kind: "string", val: s, pos: start})
		default:
			op := ""
			for _, o := range []string{"&&", "||", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%", "!", "?", ":", ".", ",", "(", ")", "[", "]", "{", "}"} {
				if strings.HasPrefix(src[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				r, _ := utf8.DecodeRuneInString(src[i:])
				return nil, &Error{Pos: start, Msg: fmt.Sprintf("unexpected character %q", r)}
			}
			i += len(op)
			out = append(out, token{kind: op, text: op, pos: start})
		}
	}
}

// lexNumber reads an int, uint or double literal.
func lexNumber(s string) (token, int, error) {
	i := 0
	if strings.HasPrefix(s, "0x") {
		i = 2
		for i < len(s) && strings.ContainsRune("0123456789abcdefABCDEF", rune(s[i])) {
			i++
		}
		return intToken(s[:i], s[i:], i, 0)
	}
	digits := func() {
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	digits()
	float := false
	if i+1 < len(s) && s[i] == '.' && s[i+1] >= '0' && s[i+1] <= '9' {
		float = true
		i++
		digits()
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && s[j] >= '0' && s[j] <= '9' {
			float = true
			i = j
			digits()
		}
	}
	if float {
		f, err := strconv.ParseFloat(s[:i], 64)
		if err != nil {
			return token{}, 0, fmt.Errorf("bad number %s", s[:i])
		}
		return token{kind: "double", val: f}, i, nil
	}
	return intToken(s[:i], s[i:], i, 10)
}

func intToken(text, rest string, n, base int) (token, int, error) {
	if strings.HasPrefix(rest, "u") || strings.HasPrefix(rest, "U") {
		return token{}, 0, fmt.Errorf("unsigned literals (%su) are not supported", text)
	}
	v, err := strconv.ParseInt(text, base, 64)
	if err != nil && base == 10 && text == "9223372036854775808" {
		return token{kind: "int", val: minIntMagnitude{}}, n, nil // valid after a minus
	}
	if err != nil {
		return token{}, 0, fmt.Errorf("integer %s out of range", text)
	}
	return token{kind: "int", val: v}, n, nil
}

// lexString reads a quoted string literal (single, double or tripled
// quotes), with CEL's escapes unless raw.
func lexString(s string, raw bool) (string, int, error) {
	q := s[:1]
	if strings.HasPrefix(s, q+q+q) {
		q = q + q + q
	}
	i := len(q)
	var b strings.Builder
	for {
		if i >= len(s) {
			return "", 0, fmt.Errorf("unterminated string")
		}
		if strings.HasPrefix(s[i:], q) {
			return b.String(), i + len(q), nil
		}
		c := s[i]
		if (c == '\n' || c == '\r') && len(q) == 1 {
			return "", 0, fmt.Errorf("newline in string")
		}
		if c != '\\' || raw {
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(s) {
			return "", 0, fmt.Errorf("unterminated string")
		}
		e := s[i+1]
		i += 2
		switch e {
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '\\', '\'', '"', '`', '?':
			b.WriteByte(e)
		case 'x', 'X', 'u', 'U':
			n := map[byte]int{'x': 2, 'X': 2, 'u': 4, 'U': 8}[e]
			if i+n > len(s) {
				return "", 0, fmt.Errorf("bad escape \\%c", e)
			}
			v, err := strconv.ParseUint(s[i:i+n], 16, 32)
			if err != nil || v > utf8.MaxRune || v >= 0xD800 && v < 0xE000 {
				return "", 0, fmt.Errorf("bad escape \\%c%s", e, s[i:i+n])
			}
			b.WriteRune(rune(v))
			i += n
		case '0', '1', '2', '3':
			if i+2 > len(s) {
				return "", 0, fmt.Errorf("bad octal escape")
			}
			v, err := strconv.ParseUint(s[i-1:i+2], 8, 8)
			if err != nil {
				return "", 0, fmt.Errorf("bad octal escape \\%s", s[i-1:i+2])
			}
			b.WriteRune(rune(v))
			i += 2
		default:
			return "", 0, fmt.Errorf("bad escape \\%c", e)
		}
	}
}

// minIntMagnitude is the literal 9223372036854775808, which is an int only
// as the operand of a minus sign.
type minIntMagnitude struct{}
