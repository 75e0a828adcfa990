package pkgview

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/resolver/purl"
)

// The CycloneDX 1.6 JSON document, the parts sandtrail writes.
type cdxBOM struct {
	BOMFormat    string         `json:"bomFormat"`
	SpecVersion  string         `json:"specVersion"`
	SerialNumber string         `json:"serialNumber"`
	Version      int            `json:"version"`
	Metadata     cdxMetadata    `json:"metadata"`
	Components   []cdxComponent `json:"components"`
}

type cdxMetadata struct {
	Timestamp  string        `json:"timestamp,omitempty"`
	Tools      cdxTools      `json:"tools"`
	Properties []cdxProperty `json:"properties,omitempty"`
}

type cdxTools struct {
	Components []cdxTool `json:"components"`
}

type cdxTool struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

type cdxComponent struct {
	Type               string        `json:"type"`
	BOMRef             string        `json:"bom-ref"`
	Group              string        `json:"group,omitempty"`
	Name               string        `json:"name"`
	Version            string        `json:"version,omitempty"`
	Purl               string        `json:"purl,omitempty"`
	Hashes             []cdxHash     `json:"hashes,omitempty"`
	ExternalReferences []cdxRef      `json:"externalReferences,omitempty"`
	Properties         []cdxProperty `json:"properties,omitempty"`
}

type cdxHash struct {
	Alg     string `json:"alg"`
	Content string `json:"content"`
}

type cdxRef struct {
	Type string `json:"type"`
	URL  string `json:"url"`
}

type cdxProperty struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// cdxAlgs are CycloneDX's names of the hash algorithms.
var cdxAlgs = map[string]string{"sha1": "SHA-1", "sha256": "SHA-256", "sha384": "SHA-384", "sha512": "SHA-512"}

// CycloneDX returns the packages of v that were installed or served as a
// CycloneDX 1.6 JSON bill of materials: one "library" component per
// package seen by the shim or served by the mirror, a bundled copy
// included (blocked requests, refused fetches and kernel_only rows are
// left out), with its purl (an npm @scope is the group), the artifact's
// hashes (the mirror's when it served one, else the shim's), where it was
// fetched from, and sandtrail's account in properties (sandtrail:seen,
// sandtrail:requested, sandtrail:bundled_in for a bundled copy, the purl
// of the component whose artifact carried it, sandtrail:requested_by,
// sandtrail:verified, sandtrail:alerts, and sandtrail:shim_hash when the
// shim's hash differs from the one given).
//
// The document is a function of v: its serialNumber is a name-based UUID
// (version 5) of the session and the components, and its timestamp the
// latest package event's time, so that one session always yields the same
// bytes.
func CycloneDX(v *View, sessionID string) ([]byte, error) {
	bom := cdxBOM{BOMFormat: "CycloneDX", SpecVersion: "1.6", Version: 1, Components: []cdxComponent{},
		Metadata: cdxMetadata{Tools: cdxTools{Components: []cdxTool{{Type: "application", Name: "sandtrail"}}}}}
	if sessionID != "" {
		bom.Metadata.Properties = []cdxProperty{{"sandtrail:session_id", sessionID}}
	}
	var last time.Time
	refs := map[string]int{}
	for _, p := range v.Packages {
		if !inBOM(p) {
			continue
		}
		c := component(p)
		if n := refs[c.BOMRef]; n > 0 {
			c.BOMRef += "#" + strconv.Itoa(n)
		}
		refs[c.BOMRef]++
		bom.Components = append(bom.Components, c)
		if p.Time.After(last) {
			last = p.Time
		}
	}
	if !last.IsZero() {
		bom.Metadata.Timestamp = last.UTC().Format(time.RFC3339)
	}
	body, err := json.Marshal(bom.Components)
	if err != nil {
		return nil, fmt.Errorf("encoding components: %w", err)
	}
	sum := sha256.Sum256(body)
	bom.SerialNumber = "urn:uuid:" + uuid5("sandtrail:"+sessionID+":"+hex.EncodeToString(sum[:]))
	b, err := json.MarshalIndent(bom, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding bom: %w", err)
	}
	return append(b, '\n'), nil
}

// inBOM reports whether a row is a package the session got: claimed by the
// shim or served by the mirror, with a name and a version.
func inBOM(p *Package) bool {
	if p.Name == "" || p.Version == "" {
		return false
	}
	switch p.Seen {
	case SeenBoth, SeenShimOnly, SeenBundled:
		return true
	case SeenMirrorOnly:
		return p.Outcome == "served"
	}
	return false
}

// artifactHash is the hash of p's artifact: the mirror's when it served
// it, else the shim's.
func artifactHash(p *Package) string {
	if p.MirrorHash == "" || p.Outcome != "served" {
		return p.Hash
	}
	return p.MirrorHash
}

func component(p *Package) cdxComponent {
	c := cdxComponent{Type: "library", Name: p.Name, Version: p.Version, Purl: p.Purl}
	if c.Purl == "" {
		c.Purl = purl.Of(p.Ecosystem, p.Name, p.Version)
	}
	if scope, name, ok := strings.Cut(p.Name, "/"); ok && strings.HasPrefix(scope, "@") {
		c.Group, c.Name = scope, name
	}
	c.BOMRef = c.Purl
	if c.BOMRef == "" {
		c.BOMRef = p.Ecosystem + "/" + p.Name + "@" + p.Version
	}
	h := artifactHash(p)
	for _, d := range digests(h) {
		c.Hashes = append(c.Hashes, cdxHash{cdxAlgs[d.alg], d.hex})
	}
	if u := cmpOr(p.UpstreamURL, p.SourceURL); u != "" {
		c.ExternalReferences = []cdxRef{{"distribution", u}}
	}
	c.Properties = []cdxProperty{{"sandtrail:seen", p.Seen}}
	add := func(name, value string) {
		if value != "" {
			c.Properties = append(c.Properties, cdxProperty{name, value})
		}
	}
	add("sandtrail:requested", p.Requested)
	add("sandtrail:bundled_in", p.BundledIn)
	add("sandtrail:requested_by", p.RequestedBy)
	add("sandtrail:required_by", strings.Join(p.RequiredBy, ", "))
	if p.Verified != nil {
		add("sandtrail:verified", strconv.FormatBool(*p.Verified))
	}
	if same, _ := compareHashes(h, p.Hash); h != p.Hash && !same {
		add("sandtrail:shim_hash", p.Hash)
	}
	add("sandtrail:alerts", strings.Join(p.Alerts, ","))
	add("sandtrail:install_activity", p.InstallActivity)
	return c
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// urlNamespace is RFC 9562's namespace for names that are URLs.
var urlNamespace = [16]byte{0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}

// uuid5 is the name-based (SHA-1, version 5) UUID of name.
func uuid5(name string) string {
	h := sha1.New()
	h.Write(urlNamespace[:])
	h.Write([]byte(name))
	u := h.Sum(nil)[:16]
	u[6] = u[6]&0x0f | 0x50
	u[8] = u[8]&0x3f | 0x80
	x := hex.EncodeToString(u)
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}
