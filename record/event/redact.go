package event

import (
	"path"
	"regexp"
	"strings"
	"sync"
)

// Mask replaces every secret that Redact, RedactURL and RedactArgv find. A
// known token keeps its non-secret prefix ("ghp_***", "AKIA***") so that an
// investigator can tell what kind of credential was there.
const Mask = "***"

// maskedValue matches a value that is already masked: the mask alone or a
// known token's prefix followed by the mask. Value patterns try it first, so
// that "x-access-token:ghp_***@github.com" stops at the mask.
const maskedValue = `(?:AKIA|ASIA|AIza|github_pat_|gh[pousr]_|npm_|pypi-|xox[baprs]-|sk-(?:ant-|proj-|svcacct-)?|eyJ[A-Za-z0-9_-]+\.)?\*\*\*`

// secretWords are the endings that make a key or flag name sensitive. A name
// is sensitive when, ignoring case, it ends in one of them: DB_PASSWORD,
// npm's _authToken, --api-key. "max_tokens" and "author" are not.
const secretWords = `password|passwd|passphrase|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|auth|credentials?|mysql_pwd|signature`

var (
	// sensitiveParam matches URL query parameter names that carry secrets
	// beyond those of secretKey.
	sensitiveParam = lazyRE(`(?i)^(?:sig|key|code|x-amz-credential|x-goog-credential|client_secret)$`)

	rePEM = lazyRE(`(?s)-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)`)

	// reURL finds URLs in free text: a scheme, "://" and what follows up to
	// white space, a quote or an angle bracket.
	reURL = lazyRE(`\b[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)

	reAuthHeader = lazyRE(`(?i)\b((?:proxy-)?authorization)(["']?[ \t]*[:=][ \t]*["']?)((?:bearer|basic|token|digest|negotiate|ntlm|bot|apikey|aws4-hmac-sha256)[ \t]+)?(` + maskedValue + `|[^\s"',;]+)`)

	reBearer = lazyRE(`(?i)\b(bearer)([ \t]+)([A-Za-z0-9._~+/=-]{12,}\**)`)

	reCookie = lazyRE(`(?i)\b((?:set-)?cookie)(["']?[ \t]*:[ \t]*["']?)([^\r\n"']+)`)
)

// secretEndings are the expansions of secretWords, for secretKey.
var secretEndings = []string{
	"password", "passwd", "passphrase", "secret", "token",
	"apikey", "api_key", "api-key", "accesskey", "access_key", "access-key",
	"privatekey", "private_key", "private-key", "auth", "credential", "credentials",
	"mysql_pwd", "signature",
}

// secretKey reports whether a key name ends, ignoring ASCII case, in one of
// secretWords, which makes its key=value pair sensitive. With flag set,
// "bearer" counts too (--oauth2-bearer). It is what the regular expression
// (?i)(?:secretWords)$ says, without trying every start position.
func secretKey(name string, flag bool) bool {
	for _, w := range secretEndings {
		if len(name) >= len(w) && hasPrefixFold(name[len(name)-len(w):], w) {
			return true
		}
	}
	return flag && len(name) >= 6 && hasPrefixFold(name[len(name)-6:], "bearer")
}

// lazyRE compiles a regular expression on first use: compiling them all
// at start-up would cost every program that imports the event package
// (the shims run before each package-manager call) half a millisecond.
func lazyRE(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// reMaskedHead matches an already masked value at the start of a string.
var reMaskedHead = lazyRE(`(?i)^` + maskedValue)

// tokenRule masks a token of a known format, keeping the prefix in group 1.
type tokenRule struct {
	anchors []string              // every match contains one of these: the cheap pre-check
	re      func() *regexp.Regexp // compiled on first use
	repl    string
}

func (r *tokenRule) mayMatch(s string) bool {
	for _, a := range r.anchors {
		if strings.Contains(s, a) {
			return true
		}
	}
	return false
}

var tokenRules = []tokenRule{
	{[]string{"AKIA"}, lazyRE(`\b(AKIA)[A-Z0-9]{16}\b`), "${1}" + Mask},
	{[]string{"ASIA"}, lazyRE(`\b(ASIA)[A-Z0-9]{16}\b`), "${1}" + Mask},
	{[]string{"github_pat_"}, lazyRE(`\b(github_pat_)[A-Za-z0-9_]{20,}`), "${1}" + Mask},
	{[]string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, lazyRE(`\b(gh[pousr]_)[A-Za-z0-9]{30,}`), "${1}" + Mask},
	{[]string{"npm_"}, lazyRE(`\b(npm_)[A-Za-z0-9]{36}`), "${1}" + Mask},
	{[]string{"pypi-"}, lazyRE(`\b(pypi-)AgE[A-Za-z0-9_-]{20,}`), "${1}" + Mask},
	{[]string{"xox"}, lazyRE(`\b(xox[baprs]-)[A-Za-z0-9-]{10,}`), "${1}" + Mask},
	{[]string{"hooks.slack.com"}, lazyRE(`(hooks\.slack\.com/(?:services|workflows)/)[A-Za-z0-9/_-]+`), "${1}" + Mask},
	// OpenAI and Anthropic keys with a kind ("sk-ant-", "sk-proj-") may
	// contain '-' and '_'; a bare "sk-" key is alphanumeric, which leaves
	// kebab-case words such as "sk-learn-…" alone.
	{[]string{"sk-"}, lazyRE(`\b(?:(sk-(?:ant-|proj-|svcacct-))[A-Za-z0-9_-]{20,}|(sk-)[A-Za-z0-9]{20,})`), "${1}${2}" + Mask},
	{[]string{"AIza"}, lazyRE(`\b(AIza)[A-Za-z0-9_-]{35}`), "${1}" + Mask},
	{[]string{"eyJ"}, lazyRE(`\b(eyJ[A-Za-z0-9_-]+)\.eyJ[A-Za-z0-9_-]*\.?[A-Za-z0-9_-]*`), "${1}." + Mask},
}

// mayContainSecret is the cheap pre-check: it is false only for strings that
// no rule can match, which is most argv words ("install", "lodash@^4.17.0").
func mayContainSecret(s string) bool {
	if len(s) < 6 {
		return false
	}
	if strings.ContainsAny(s, "=:_-") {
		return true
	}
	for i := range tokenRules {
		if tokenRules[i].mayMatch(s) {
			return true
		}
	}
	return containsFold(s, "bearer")
}

// hasSecretWord reports whether s contains, ignoring ASCII case, a word
// that every match of redactKV and redactFlagSpace contains: pass (password,
// passwd, passphrase), pwd, secret, signature, token, key, auth, credential
// or bearer. It is one pass over s, and most text fails it, which spares the
// regular expressions.
func hasSecretWord(s string) bool {
	for i := 0; i < len(s); i++ {
		rest := s[i:]
		switch s[i] | 0x20 {
		case 'p':
			if hasPrefixFold(rest, "pass") || hasPrefixFold(rest, "pwd") {
				return true
			}
		case 's':
			if hasPrefixFold(rest, "secret") || hasPrefixFold(rest, "signature") {
				return true
			}
		case 't':
			if hasPrefixFold(rest, "token") {
				return true
			}
		case 'k':
			if hasPrefixFold(rest, "key") {
				return true
			}
		case 'a':
			if hasPrefixFold(rest, "auth") {
				return true
			}
		case 'c':
			if hasPrefixFold(rest, "credential") {
				return true
			}
		case 'b':
			if hasPrefixFold(rest, "bearer") {
				return true
			}
		}
	}
	return false
}

// hasPrefixFold reports whether s begins with the lower-case ASCII word
// prefix, ignoring ASCII case.
func hasPrefixFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for j := 0; j < len(prefix); j++ {
		c := s[j]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[j] {
			return false
		}
	}
	return true
}

// containsFold reports whether s contains the lower-case ASCII word sub,
// ignoring ASCII case, without allocating.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if hasPrefixFold(s[i:], sub) {
			return true
		}
	}
	return false
}

// Redact returns s with the credentials it recognises replaced by Mask. It
// is meant for free text (tool and model summaries, a single argv element,
// a header, a config line) and is idempotent. Strings without anything that
// could be a secret are returned as they are, without allocating.
//
// Producers apply Redact, RedactURL and RedactArgv to free text, URLs and
// argv before they are recorded. Redaction is a best-effort filter for
// credentials that have a recognisable shape, not a guarantee that no secret
// survives: a bare password with nothing around it looks like any other word.
//
// What is masked:
//   - PEM private key blocks, including a block cut off before its END line;
//   - credentials in URLs (user:password@ keeps the user, a long token-only
//     userinfo is masked whole) and sensitive query or fragment parameters
//     (token, access_token, api_key, password, secret, sig, signature,
//     X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token, key, …);
//   - Authorization and Proxy-Authorization header values (the scheme is
//     kept: "Authorization: Bearer ***"), "Bearer <token>" and Cookie values;
//   - key=value and key: value pairs whose key ends in password, passwd,
//     passphrase, secret, token, api_key, access_key, private_key, auth,
//     credential(s) or signature, in env style (DB_PASSWORD=x, NPM_TOKEN=x),
//     flag style (--password=x) and JSON or YAML style ("token": "x");
//   - "--password x" style flags followed by their value;
//   - tokens of known formats wherever they appear: AWS access key ids
//     (AKIA/ASIA), GitHub (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_), npm
//     (npm_), PyPI (pypi-AgEI…), Slack (xoxb- and friends, and incoming
//     webhook URLs), OpenAI and Anthropic keys (sk-…), Google API keys (AIza)
//     and JWTs (the header is kept, the payload and signature are masked).
func Redact(s string) string {
	if !mayContainSecret(s) {
		return s
	}
	// Each pass is idempotent on its own output in practice; looping to a
	// fixed point makes it so even when masking one secret reveals the shape
	// of another.
	for range 8 {
		r := redactOnce(s)
		if r == s {
			return r
		}
		s = r
	}
	return s
}

// redactOnce applies every rule once. Known token formats go first, so that
// "GITHUB_TOKEN=ghp_…" becomes "GITHUB_TOKEN=ghp_***" and keeps its kind;
// the key-based rules then leave an already masked value alone.
func redactOnce(s string) string {
	if strings.Contains(s, "-----BEGIN") {
		s = rePEM().ReplaceAllString(s, "-----BEGIN ${1}PRIVATE KEY-----"+Mask+"-----END ${1}PRIVATE KEY-----")
	}
	s = redactTokens(s)
	if strings.Contains(s, "://") {
		s = reURL().ReplaceAllStringFunc(s, redactURL)
	}
	if strings.ContainsAny(s, "=:") {
		if containsFold(s, "authorization") {
			s = replaceGroup(s, reAuthHeader(), 4)
		}
		if containsFold(s, "cookie") {
			s = replaceGroup(s, reCookie(), 3)
		}
		if hasSecretWord(s) {
			s = redactKV(s)
		}
	}
	if containsFold(s, "bearer") {
		s = replaceGroup(s, reBearer(), 3)
	}
	if strings.Contains(s, "-") && hasSecretWord(s) {
		s = redactFlagSpace(s)
	}
	return s
}

// redactTokens masks the tokens of known formats in s.
func redactTokens(s string) string {
	for i := range tokenRules {
		if r := &tokenRules[i]; r.mayMatch(s) {
			s = r.re().ReplaceAllString(s, r.repl)
		}
	}
	return s
}

// reMasked matches a value that is already masked: the mask alone or a known
// token's prefix followed by the mask.
var reMasked = lazyRE(`^` + maskedValue + `$`)

// isMasked reports whether v, possibly quoted, is already masked.
func isMasked(v string) bool {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		v = v[1 : len(v)-1]
	}
	return reMasked().MatchString(v)
}

// replaceGroup replaces submatch group g of every match of re in s with the
// mask, keeping the quotes of a quoted value and leaving values that are
// already masked alone.
func replaceGroup(s string, re *regexp.Regexp, g int) string {
	ms := re.FindAllStringSubmatchIndex(s, -1)
	if ms == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range ms {
		start, end := m[2*g], m[2*g+1]
		if start < 0 || isMasked(s[start:end]) {
			continue
		}
		b.WriteString(s[last:start])
		b.WriteString(maskValue(s[start:end]))
		last = end
	}
	b.WriteString(s[last:])
	return b.String()
}

// maskValue masks v, keeping the quotes of a quoted value.
func maskValue(v string) string {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		return v[:1] + Mask + v[:1]
	}
	return Mask
}

// RedactURL returns u with the credentials in it masked: the password of its
// userinfo (user:***@host), a token used as the whole userinfo (***@host),
// sensitive query and fragment parameters (?access_token=***), and tokens of
// known formats anywhere in it. A URL without credentials is returned
// byte for byte as it was; nothing is re-encoded.
func RedactURL(u string) string {
	if !mayContainSecret(u) {
		return u
	}
	if strings.Contains(u, "://") {
		u = redactURL(redactTokens(u))
	}
	return Redact(u)
}

// redactURL masks the userinfo and the sensitive parameters of one URL that
// contains "://".
func redactURL(u string) string {
	i := strings.Index(u, "://")
	if i < 0 {
		return u
	}
	head, rest := u[:i+3], u[i+3:]
	authEnd := strings.IndexAny(rest, "/?#")
	if authEnd < 0 {
		authEnd = len(rest)
	}
	authority, tail := rest[:authEnd], rest[authEnd:]
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		authority = redactUserinfo(authority[:at]) + authority[at:]
	}
	if strings.ContainsAny(tail, "?#") {
		tail = redactParams(tail)
	}
	return head + authority + tail
}

// redactUserinfo masks the password of "user:password", or the whole
// userinfo when it has no password but looks like a token.
func redactUserinfo(ui string) string {
	if user, pass, ok := strings.Cut(ui, ":"); ok {
		if pass == "" || isMasked(pass) {
			return ui
		}
		return user + ":" + Mask
	}
	if len(ui) >= 20 && !isMasked(ui) {
		return Mask
	}
	return ui
}

// redactParams masks the values of sensitive parameters in the query and
// fragment of a URL's path-and-after part.
func redactParams(tail string) string {
	var b strings.Builder
	b.Grow(len(tail))
	// Parameters start after '?' or '#' and are separated by '&' or ';'.
	inParams := false
	for len(tail) > 0 {
		j := strings.IndexAny(tail, "?#&;")
		if j < 0 {
			j = len(tail)
		}
		part := tail[:j]
		if inParams {
			if name, val, ok := strings.Cut(part, "="); ok && val != "" && !isMasked(val) && sensitiveKey(name) {
				part = name + "=" + Mask
			}
		}
		b.WriteString(part)
		if j == len(tail) {
			break
		}
		b.WriteByte(tail[j])
		inParams = true
		tail = tail[j+1:]
	}
	return b.String()
}

// sensitiveKey reports whether a key, parameter or flag name names a secret.
func sensitiveKey(name string) bool {
	return secretKey(name, true) || sensitiveParam().MatchString(name)
}

// sensitiveFlag reports whether a flag such as "--password" or "-token"
// (given without its value) takes a secret as its value.
func sensitiveFlag(arg string) bool {
	if !strings.HasPrefix(arg, "-") || strings.Contains(arg, "=") {
		return false
	}
	name := strings.ToLower(strings.TrimLeft(arg, "-"))
	if name == "" || strings.HasPrefix(name, "no-") || strings.HasPrefix(name, "no_") {
		return false
	}
	return secretKey(name, true) || name == "pass"
}

// RedactArgv returns a copy of argv with secrets masked; argv itself is not
// modified. Every element goes through Redact, and in addition:
//
//   - the value after a sensitive flag ("--password x", "--token x",
//     "--api-key x", "--auth x", "--secret x") is masked unless it starts
//     with '-' (a flag that prompts, followed by the next flag);
//   - "-p" is treated as a password only where that is unambiguous: attached
//     to mysql, mysqldump, mysqladmin and mariadb ("-psecret"; a detached
//     "-p" prompts there), and for sshpass and "docker|podman|nerdctl|
//     buildah|helm ... login";
//   - curl and wget "-u user:pass" and "--user user:pass" keep the user;
//   - redis-cli "-a x" and openssl "pass:x" pass phrases are masked.
func RedactArgv(argv []string) []string {
	if argv == nil {
		return nil
	}
	out := make([]string, len(argv))
	prog := ""
	if len(argv) > 0 {
		prog = path.Base(argv[0])
	}
	login := false
	switch prog {
	case "docker", "podman", "nerdctl", "buildah", "helm", "skopeo", "oras", "crane":
		for _, a := range argv[1:] {
			if a == "login" {
				login = true
				break
			}
		}
	}
	maskNext := false
	userNext := false
	for i, a := range argv {
		switch {
		case maskNext:
			maskNext = false
			out[i] = maskWhole(Redact(a))
			continue
		case userNext:
			userNext = false
			out[i] = Redact(maskUserPass(a))
			continue
		}
		r := Redact(a)
		if i == 0 {
			out[i] = r
			continue
		}
		next := ""
		if i+1 < len(argv) {
			next = argv[i+1]
		}
		nextIsValue := i+1 < len(argv) && !strings.HasPrefix(next, "-")
		switch {
		case isMySQL(prog) && strings.HasPrefix(a, "-p") && len(a) > 2 && !strings.HasPrefix(a, "--"):
			r = "-p" + Mask
		case (prog == "sshpass" || login) && a == "-p":
			maskNext = i+1 < len(argv)
		case (prog == "sshpass" || login) && strings.HasPrefix(a, "-p") && len(a) > 2 && !strings.HasPrefix(a, "--"):
			r = "-p" + Mask
		case (prog == "curl" || prog == "wget") && (a == "-u" || a == "--user" || a == "--proxy-user" || a == "-U"):
			userNext = i+1 < len(argv)
		case (prog == "curl" || prog == "wget") && strings.HasPrefix(a, "-u") && len(a) > 2 && !strings.HasPrefix(a, "--"):
			r = "-u" + Redact(maskUserPass(a[2:]))
		case (prog == "curl" || prog == "wget") && (strings.HasPrefix(a, "--user=") || strings.HasPrefix(a, "--proxy-user=")):
			k, v, _ := strings.Cut(a, "=")
			r = k + "=" + Redact(maskUserPass(v))
		case prog == "redis-cli" && a == "-a":
			maskNext = i+1 < len(argv)
		case prog == "openssl" && (a == "-k" || a == "-kfile"):
			maskNext = a == "-k" && i+1 < len(argv)
		case prog == "openssl" && strings.HasPrefix(a, "pass:") && !isMasked(a[len("pass:"):]):
			r = "pass:" + Mask
		case sensitiveFlag(a):
			maskNext = nextIsValue
		}
		out[i] = r
	}
	return out
}

func isMySQL(prog string) bool {
	switch prog {
	case "mysql", "mysqldump", "mysqladmin", "mariadb", "mariadb-dump", "mariadb-admin", "mysqlimport", "mysqlshow", "mysqlcheck":
		return true
	}
	return false
}

// maskWhole masks an argument that is a secret as a whole.
func maskWhole(a string) string {
	if a == "" || isMasked(a) {
		return a
	}
	return Mask
}

// maskUserPass masks the password of "user:pass", keeping the user.
func maskUserPass(a string) string {
	user, pass, ok := strings.Cut(a, ":")
	if !ok || pass == "" || isMasked(pass) {
		return a
	}
	return user + ":" + Mask
}

// isNameByte reports whether c may appear in a key or flag name.
func isNameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-'
}

// isSpace reports whether c is white space as \s is in a regexp.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'
}

// redactKV masks the value of every key=value and key: value pair whose key
// is sensitive (secretKey). A key is a run of letters, digits, '_', '.'
// and '-', optionally followed by a quote; blanks may surround the
// separator. The value is an already masked value, a double-quoted string
// with backslash escapes, a single-quoted string, or a run up to white
// space, a quote, ',', ';' or '&' that does not start with ':' or '=' (so
// "token::Lexer" and "token == x" are left alone).
//
// It is a hand-written scanner rather than one regular expression because
// Go's regexp tries every start position against every key word; this looks
// only at separators. A test checks that it agrees with the equivalent
// expression, kvPattern in the tests.
func redactKV(s string) string {
	return scanMask(s, "=:", kvValue)
}

// kvValue finds the sensitive value of the key=value pair whose separator
// is at i, looking back no further than pos.
func kvValue(s string, i, pos int) (v, ve int, ok bool) {
	j := i
	for j > pos && (s[j-1] == ' ' || s[j-1] == '\t') {
		j--
	}
	if j > pos && (s[j-1] == '"' || s[j-1] == '\'') {
		j--
	}
	e := j
	for j > pos && isNameByte(s[j-1]) {
		j--
	}
	if j == e || !secretKey(s[j:e], false) {
		return 0, 0, false
	}
	v = skipBlanks(s, i+1)
	ve = kvValueEnd(s, v)
	return v, ve, ve >= 0
}

// scanMask is the loop of the hand-written scanners: at every byte of s
// that is one of triggers, value says whether a sensitive value starts
// there (and where it ends; pos is the end of the previous one, which a
// match must not reach back over). Each value is masked unless it already
// is, and the scan resumes after it.
func scanMask(s, triggers string, value func(s string, i, pos int) (v, ve int, ok bool)) string {
	var b strings.Builder
	last, pos := 0, 0
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(triggers, s[i]) < 0 {
			continue
		}
		v, ve, ok := value(s, i, pos)
		if !ok {
			continue
		}
		if !isMasked(s[v:ve]) {
			b.WriteString(s[last:v])
			b.WriteString(maskValue(s[v:ve]))
			last = ve
		}
		pos = ve
		i = ve - 1
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// skipBlanks returns the index of the first byte at or after v that is not
// a space or a tab.
func skipBlanks(s string, v int) int {
	for v < len(s) && (s[v] == ' ' || s[v] == '\t') {
		v++
	}
	return v
}

// kvValueEnd returns the end of the key=value value starting at v, or -1.
func kvValueEnd(s string, v int) int {
	if v >= len(s) {
		return -1
	}
	if m := reMaskedHead().FindStringIndex(s[v:]); m != nil {
		return v + m[1]
	}
	switch c := s[v]; {
	case c == '"':
		for k := v + 1; k < len(s); k++ {
			switch s[k] {
			case '"':
				return k + 1
			case '\\':
				if k+1 >= len(s) || s[k+1] == '\n' {
					return -1
				}
				k++
			}
		}
		return -1
	case c == '\'':
		if k := strings.IndexByte(s[v+1:], '\''); k >= 0 {
			return v + 1 + k + 1
		}
		return -1
	case isSpace(c) || strings.IndexByte(`"',;&:=`, c) >= 0:
		return -1
	}
	k := v + 1
	for k < len(s) && !isSpace(s[k]) && strings.IndexByte(`"',;&`, s[k]) < 0 {
		k++
	}
	return k
}

// redactFlagSpace masks the value after a sensitive flag in free text:
// "--password hunter2", "-token abc". The flag starts the text or follows
// white space or a quote; its name ends in a secret word (secretKey);
// blanks separate it from the value, which is an already masked value, a
// quoted string, or a run up to white space or a quote that does not start
// with '-'. A test checks that it agrees with flagPattern in the tests.
func redactFlagSpace(s string) string {
	return scanMask(s, "-", flagValue)
}

// flagValue finds the value of the sensitive flag starting at i, which
// must not follow the previous value (ending at pos) directly.
func flagValue(s string, i, pos int) (v, ve int, ok bool) {
	if i > 0 && (i-1 < pos || !isSpace(s[i-1]) && s[i-1] != '"' && s[i-1] != '\'') {
		return 0, 0, false
	}
	e := i + 1
	for e < len(s) && isNameByte(s[e]) {
		e++
	}
	if e == i+1 || e >= len(s) || (s[e] != ' ' && s[e] != '\t') || !secretKey(s[i+1:e], true) {
		return 0, 0, false
	}
	v = skipBlanks(s, e)
	ve = flagValueEnd(s, v)
	return v, ve, ve >= 0
}

// flagValueEnd returns the end of the flag value starting at v, or -1.
func flagValueEnd(s string, v int) int {
	if v >= len(s) {
		return -1
	}
	if m := reMaskedHead().FindStringIndex(s[v:]); m != nil {
		return v + m[1]
	}
	switch c := s[v]; {
	case c == '"' || c == '\'':
		if k := strings.IndexByte(s[v+1:], c); k >= 0 {
			return v + 1 + k + 1
		}
		return -1
	case isSpace(c) || c == '-':
		return -1
	}
	k := v + 1
	for k < len(s) && !isSpace(s[k]) && s[k] != '"' && s[k] != '\'' {
		k++
	}
	return k
}
