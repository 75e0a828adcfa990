package npm

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/cache"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/resolver/listing"
)

// Key is one of the registry's signing keys, as /-/npm/v1/keys lists it.
type Key struct {
	KeyID   string `json:"keyid"`
	KeyType string `json:"keytype"`
	Scheme  string `json:"scheme"`
	// Key is the base64 SPKI DER public key.
	Key     string `json:"key"`
	Expires string `json:"expires"`
}

// keyList is the body of /-/npm/v1/keys.
type keyList struct {
	Keys []Key `json:"keys"`
}

// keyring holds the registry's keys: pinned in the configuration, or
// fetched from the upstream once and then kept (trust on first use: a key
// that changes upstream is not followed until the cache entry is removed,
// and an upstream that once published keys cannot strip signatures
// later). Once keys are known, every version needs a valid signature.
type keyring struct {
	h      *Handler
	mu     sync.Mutex
	pinned []Key
	keys   map[string]*ecdsa.PublicKey
	exp    map[string]time.Time
	raw    []byte
	// none is when the upstream last answered that it has no keys.
	none time.Time
	// verified remembers signatures checked (message → key id).
	verified  sync.Map
	nverified atomic.Int64
}

// ErrNoKeys is returned when the registry's keys could not be fetched (the
// upstream failed): no signature can be checked and the tarball is refused.
var ErrNoKeys = errors.New("npm: the registry's signing keys are unknown")

// ErrUnsigned is returned when the upstream publishes no signing keys at
// all (some private registries and mirrors): the tarball's digests are
// still checked, and its record says the signature was unavailable.
var ErrUnsigned = errors.New("npm: the upstream registry publishes no signing keys (none pinned in mirror.npm_keys), so registry signatures cannot be checked")

// Pin makes ks the only keys trusted for h's upstream.
func (h *Handler) Pin(ks []Key) error {
	h.keys.mu.Lock()
	defer h.keys.mu.Unlock()
	h.keys.pinned = ks
	return h.keys.set(ks)
}

// set parses ks into the keyring.
func (k *keyring) set(ks []Key) error {
	keys, exp := map[string]*ecdsa.PublicKey{}, map[string]time.Time{}
	for _, key := range ks {
		der, err := base64.StdEncoding.DecodeString(key.Key)
		if err != nil {
			return fmt.Errorf("npm: key %s: %w", key.KeyID, err)
		}
		pub, err := x509.ParsePKIXPublicKey(der)
		if err != nil {
			return fmt.Errorf("npm: key %s: %w", key.KeyID, err)
		}
		ec, ok := pub.(*ecdsa.PublicKey)
		if !ok || key.KeyType != "ecdsa-sha2-nistp256" {
			return fmt.Errorf("npm: key %s is %s, want ecdsa-sha2-nistp256", key.KeyID, key.KeyType)
		}
		keys[key.KeyID] = ec
		if key.Expires != "" {
			t, err := time.Parse(time.RFC3339Nano, key.Expires)
			if err != nil {
				return fmt.Errorf("npm: key %s expires %q: %w", key.KeyID, key.Expires, err)
			}
			exp[key.KeyID] = t
		}
	}
	raw, _ := json.Marshal(keyList{Keys: ks})
	k.keys, k.exp, k.raw = keys, exp, raw
	return nil
}

// load returns the keys: pinned, cached, or fetched from the upstream and
// cached. Keys once known are kept for good. That the upstream publishes
// none is cached too (an empty list), checked again after the metadata TTL,
// and kept while the upstream cannot be reached.
func (k *keyring) load(ctx context.Context) (map[string]*ecdsa.PublicKey, map[string]time.Time, []byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys != nil {
		return k.keys, k.exp, k.raw, nil
	}
	h := k.h
	now := h.env.Now()
	if !k.none.IsZero() && now.Sub(k.none) < h.env.MetaTTL {
		return nil, nil, nil, ErrUnsigned
	}
	key := "npm:keys:" + h.upstream.String()
	m, err := h.env.Cache.GetMeta(key)
	cached := err == nil
	var ks keyList
	if cached {
		if err := json.Unmarshal(m.Body, &ks); err != nil {
			return nil, nil, nil, fmt.Errorf("%w: the cached key list does not parse: %v", ErrNoKeys, err)
		}
	}
	if !cached || (len(ks.Keys) == 0 && m.Age(now) >= h.env.MetaTTL) {
		b, _, ferr := h.env.Upstream.GetMeta(ctx, h.upstreamURL("-/npm/v1/keys"), "application/json")
		switch {
		case isNotFound(ferr):
			m, ks = cache.Meta{Body: []byte(`{"keys":[]}`), Fetched: now}, keyList{}
		case ferr != nil && !cached:
			return nil, nil, nil, fmt.Errorf("%w: fetching them: %w", ErrNoKeys, ferr)
		case ferr == nil:
			if err := json.Unmarshal(b, &ks); err != nil {
				return nil, nil, nil, fmt.Errorf("%w: the upstream's key list does not parse", ErrNoKeys)
			}
			m = cache.Meta{Body: b, Fetched: now}
		}
		if ferr == nil || isNotFound(ferr) {
			if err := h.env.Cache.PutMeta(key, m); err != nil {
				h.env.Log.Warn("caching the registry's keys", "error", err)
			}
		}
	}
	if len(ks.Keys) == 0 {
		k.none = now
		return nil, nil, nil, ErrUnsigned
	}
	if err := k.set(ks.Keys); err != nil {
		return nil, nil, nil, err
	}
	return k.keys, k.exp, k.raw, nil
}

// verifySignature checks that a signature of a known, unexpired key covers
// "name@version:integrity". It returns the key id. A signature verified
// once is remembered, by memo (signatureMemo: the signed message and the
// signatures).
func (h *Handler) verifySignature(ctx context.Context, name, v string, in *listing.Manifest, memo string) (string, error) {
	keys, exp, _, err := h.keys.load(ctx)
	if err != nil {
		return "", err
	}
	if id, ok := h.keys.verified.Load(memo); ok {
		return id.(string), nil
	}
	id, err := checkSignatures(keys, exp, name, v, in)
	if err == nil {
		if h.keys.nverified.Add(1) > maxVerified {
			h.keys.verified.Clear()
			h.keys.nverified.Store(0)
		}
		h.keys.verified.Store(memo, id)
	}
	return id, err
}

// signatureMemo is what verifySignature remembers a version's verified
// signature by: all that the check reads of the version.
func signatureMemo(name, v string, in *listing.Manifest) string {
	return name + "@" + v + ":" + in.Integrity + "\x00" + fmt.Sprint(in.Signatures)
}

// maxVerified bounds the remembered signatures.
const maxVerified = 1 << 17

// checkSignatures finds a valid signature among in's.
func checkSignatures(keys map[string]*ecdsa.PublicKey, exp map[string]time.Time, name, v string, in *listing.Manifest) (string, error) {
	if len(in.Signatures) == 0 {
		return "", errors.New("npm: the version has no registry signature")
	}
	digest := sha256.Sum256([]byte(name + "@" + v + ":" + in.Integrity))
	var why []string
	for _, s := range in.Signatures {
		pub, ok := keys[s.KeyID]
		if !ok {
			why = append(why, "unknown key "+event.Clip(s.KeyID, 120))
			continue
		}
		if t, ok := exp[s.KeyID]; ok && !in.Published.IsZero() && !in.Published.Before(t) {
			why = append(why, fmt.Sprintf("key %s expired %s, before the version was published", s.KeyID, t.Format(time.RFC3339)))
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(s.Sig)
		if err == nil && ecdsa.VerifyASN1(pub, digest[:], sig) {
			return s.KeyID, nil
		}
		why = append(why, "bad signature by "+s.KeyID)
	}
	return "", fmt.Errorf("npm: no valid registry signature: %v", why)
}

// serveKeys serves the keys the mirror trusts.
func (h *Handler) serveKeys(w http.ResponseWriter, r *http.Request) error {
	_, _, raw, err := h.keys.load(r.Context())
	if err != nil {
		return fetch.Errorf(http.StatusBadGateway, fetch.UpstreamError, err, "the registry's signing keys are not available")
	}
	w.Header().Set("Content-Type", "application/json")
	_, err = w.Write(raw)
	return err
}

// serveAttestations proxies a version's attestations (Sigstore bundles),
// cached.
func (h *Handler) serveAttestations(w http.ResponseWriter, r *http.Request, spec string) error {
	name, v, ok := cutVersion(spec)
	if !ok || CheckName(name) != nil || v == "" {
		return fetch.Errorf(http.StatusBadRequest, "bad_name", nil, "bad attestations path %q", event.Clip(spec, 120))
	}
	key := "npm:attestations:" + h.upstream.String() + name + "@" + v
	m, err := h.env.Cache.GetMeta(key)
	if err != nil {
		b, _, ferr := h.env.Upstream.GetMeta(r.Context(), h.upstreamURL("-/npm/v1/attestations/"+escapeName(name)+"@"+v), "application/json")
		if ferr != nil {
			return ferr
		}
		m = cache.Meta{Body: b, Fetched: h.env.Now()}
		if err := h.env.Cache.PutMeta(key, m); err != nil {
			h.env.Log.Warn("caching attestations", "name", name, "error", err)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_, err = w.Write(m.Body)
	return err
}

// cutVersion splits "name@version", a scoped name's leading @ kept.
func cutVersion(s string) (name, v string, ok bool) {
	i := -1
	for j := len(s) - 1; j > 0; j-- {
		if s[j] == '@' {
			i = j
			break
		}
	}
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}
