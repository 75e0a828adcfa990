package npm

import (
	"regexp"
	"strings"
	"sync"
)

// The regular expressions of node-semver's internal/re.js, built the same way: the same source
// strings, the same "safe" bounding of \s*, \d* and [a-zA-Z0-9-]* repetitions, and JavaScript's
// definition of \s. Go's regexp picks the same submatches as a backtracking engine
// (leftmost-first), and none of these expressions use backreferences or look-around.

const (
	maxLength          = 256
	maxSafeBuildLength = maxLength - 6
	maxSafeInteger     = 1<<53 - 1
	letterDashNumber   = `[a-zA-Z0-9-]`
)

// jsSpace is the body of a character class matching what JavaScript's \s and String.trim match.
const jsSpace = `\t\n\v\f\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}`

func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

func jsTrim(s string) string { return strings.TrimFunc(s, isJSSpace) }

// makeSafe is node-semver's makeSafeRegex.
func makeSafe(v string) string {
	for _, tk := range []struct {
		token, max string
	}{{`\s`, "1"}, {`\d`, "256"}, {letterDashNumber, "250"}} {
		v = strings.ReplaceAll(v, tk.token+"*", tk.token+"{0,"+tk.max+"}")
		v = strings.ReplaceAll(v, tk.token+"+", tk.token+"{1,"+tk.max+"}")
	}
	return v
}

// compileJS compiles a node-semver source string with JavaScript's meaning of \s.
func compileJS(v string) *regexp.Regexp {
	v = strings.ReplaceAll(v, `[v=\s]`, `[v=`+jsSpace+`]`)
	v = strings.ReplaceAll(v, `\s`, `[`+jsSpace+`]`)
	return regexp.MustCompile(v)
}

var (
	srcNumericIdentifier      = `0|[1-9]\d*`
	srcNumericIdentifierLoose = `\d+`
	srcNonNumericIdentifier   = `\d*[a-zA-Z-]` + letterDashNumber + `*`
	srcMainVersion            = `(` + srcNumericIdentifier + `)\.(` + srcNumericIdentifier + `)\.(` + srcNumericIdentifier + `)`
	srcMainVersionLoose       = `(` + srcNumericIdentifierLoose + `)\.(` + srcNumericIdentifierLoose + `)\.(` + srcNumericIdentifierLoose + `)`
	srcPrereleaseID           = `(?:` + srcNonNumericIdentifier + `|` + srcNumericIdentifier + `)`
	srcPrereleaseIDLoose      = `(?:` + srcNonNumericIdentifier + `|` + srcNumericIdentifierLoose + `)`
	srcPrerelease             = `(?:-(` + srcPrereleaseID + `(?:\.` + srcPrereleaseID + `)*))`
	srcPrereleaseLoose        = `(?:-?(` + srcPrereleaseIDLoose + `(?:\.` + srcPrereleaseIDLoose + `)*))`
	srcBuildID                = letterDashNumber + `+`
	srcBuild                  = `(?:\+(` + srcBuildID + `(?:\.` + srcBuildID + `)*))`
	srcFullPlain              = `v?` + srcMainVersion + srcPrerelease + `?` + srcBuild + `?`
	srcLoosePlain             = `[v=\s]*` + srcMainVersionLoose + srcPrereleaseLoose + `?` + srcBuild + `?`
	srcGTLT                   = `((?:<|>)?=?)`
	srcXRangeID               = srcNumericIdentifier + `|x|X|\*`
	srcXRangeIDLoose          = srcNumericIdentifierLoose + `|x|X|\*`
	srcXRangePlain            = `[v=\s]*(` + srcXRangeID + `)(?:\.(` + srcXRangeID + `)(?:\.(` + srcXRangeID + `)(?:` + srcPrerelease + `)?` + srcBuild + `?)?)?`
	srcXRangePlainLoose       = `[v=\s]*(` + srcXRangeIDLoose + `)(?:\.(` + srcXRangeIDLoose + `)(?:\.(` + srcXRangeIDLoose + `)(?:` + srcPrereleaseLoose + `)?` + srcBuild + `?)?)?`
	srcLoneTilde              = `(?:~>?)`
	srcLoneCaret              = `(?:\^)`
)

func safe(v string) *regexp.Regexp { return compileJS(makeSafe(v)) }

// The expressions are compiled on first use: compiling them all costs
// tens of milliseconds, which every program that imports the resolver
// (the shims run before each package-manager call) would pay at start-up.
var (
	reFull            = sync.OnceValue(func() *regexp.Regexp { return safe(`^` + srcFullPlain + `$`) })
	reLoose           = sync.OnceValue(func() *regexp.Regexp { return safe(`^` + srcLoosePlain + `$`) })
	reXRange          = sync.OnceValue(func() *regexp.Regexp { return safe(`^` + srcGTLT + `\s*` + srcXRangePlain + `$`) })
	reXRangeLoose     = sync.OnceValue(func() *regexp.Regexp { return safe(`^` + srcGTLT + `\s*` + srcXRangePlainLoose + `$`) })
	reTildeTrim       = sync.OnceValue(func() *regexp.Regexp { return safe(`(\s*)` + srcLoneTilde + `\s+`) })
	reTilde           = sync.OnceValue(func() *regexp.Regexp { return safe(`^` + srcLoneTilde + srcXRangePlain + `$`) })
	reTildeLoose      = sync.OnceValue(func() *regexp.Regexp { return safe(`^` + srcLoneTilde + srcXRangePlainLoose + `$`) })
	reCaretTrim       = sync.OnceValue(func() *regexp.Regexp { return safe(`(\s*)` + srcLoneCaret + `\s+`) })
	reCaret           = sync.OnceValue(func() *regexp.Regexp { return safe(`^` + srcLoneCaret + srcXRangePlain + `$`) })
	reCaretLoose      = sync.OnceValue(func() *regexp.Regexp { return safe(`^` + srcLoneCaret + srcXRangePlainLoose + `$`) })
	reComparatorLoose = sync.OnceValue(func() *regexp.Regexp { return safe(`^` + srcGTLT + `\s*(` + srcLoosePlain + `)$|^$`) })
	reComparator      = sync.OnceValue(func() *regexp.Regexp { return safe(`^` + srcGTLT + `\s*(` + srcFullPlain + `)$|^$`) })
	reComparatorTrim  = sync.OnceValue(func() *regexp.Regexp {
		return safe(`(\s*)` + srcGTLT + `\s*(` + srcLoosePlain + `|` + srcXRangePlain + `)`)
	})
	reHyphenRange = sync.OnceValue(func() *regexp.Regexp { return safe(`^\s*(` + srcXRangePlain + `)\s+-\s+(` + srcXRangePlain + `)\s*$`) })
	reHyphenLoose = sync.OnceValue(func() *regexp.Regexp {
		return safe(`^\s*(` + srcXRangePlainLoose + `)\s+-\s+(` + srcXRangePlainLoose + `)\s*$`)
	})
	reStar       = sync.OnceValue(func() *regexp.Regexp { return safe(`(<|>)?=?\s*\*`) })
	reGTE0       = sync.OnceValue(func() *regexp.Regexp { return safe(`^\s*>=\s*0\.0\.0\s*$`) })
	reGTE0Pre    = sync.OnceValue(func() *regexp.Regexp { return safe(`^\s*>=\s*0\.0\.0-0\s*$`) })
	reBuild      = sync.OnceValue(func() *regexp.Regexp { return safe(srcBuild) })
	reBuildStrip = sync.OnceValue(func() *regexp.Regexp { return compileJS(srcBuild) }) // range.js's BUILDSTRIPRE is built from the unsafe source
	reSpaces     = sync.OnceValue(func() *regexp.Regexp { return compileJS(`\s+`) })
	reNumeric    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]+$`) })
)

// replaceFirst is JavaScript's String.prototype.replace with a non-global regular expression
// and a replacement function; unmatched groups are "" (node-semver treats them like undefined).
func replaceFirst(re *regexp.Regexp, s string, f func(m []string) string) string {
	loc := re.FindStringSubmatchIndex(s)
	if loc == nil {
		return s
	}
	m := make([]string, len(loc)/2)
	for i := range m {
		if loc[2*i] >= 0 {
			m[i] = s[loc[2*i]:loc[2*i+1]]
		}
	}
	return s[:loc[0]] + f(m) + s[loc[1]:]
}

// splitSpaces is JavaScript's s.split(/\s+/).
func splitSpaces(s string) []string { return reSpaces().Split(s, -1) }
