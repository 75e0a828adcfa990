package event

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// DecodeStored decodes a stored entry: an event as the journal holds it,
// or the index's copy of one. It is the one decoder for what the record
// already holds (the index, query hits, timelines, package views and run
// summaries all read events through it); Unmarshal stays the gate for
// untrusted bytes on their way in.
//
// It is lenient where Unmarshal is strict: fields of a newer schema are
// ignored rather than hiding the event, and Validate is not run, since the
// entry was validated when it was journaled. It requires what every reader
// needs, a kind and a time. Its errors begin "decoding event:".
func DecodeStored(raw []byte) (*Event, error) {
	var e Event
	if err := json.Unmarshal(raw, &e); err != nil {
		return nil, fmt.Errorf("decoding event: %w", err)
	}
	if e.Kind == "" {
		return nil, errors.New("decoding event: no kind")
	}
	if e.TS.IsZero() {
		return nil, errors.New("decoding event: no ts")
	}
	return &e, nil
}

// storedHead is what StoredHead reads of a stored entry.
type storedHead struct {
	TS   time.Time `json:"ts"`
	Kind string    `json:"kind"`
}

// StoredHead reads only the kind and the time of a stored entry, for a
// reader that passes the entry on as it is (a jsonl sink): it decodes no
// sub-object, so it costs a fraction of DecodeStored. Its errors are
// DecodeStored's.
func StoredHead(raw []byte) (kind string, ts time.Time, err error) {
	var h storedHead
	if err := json.Unmarshal(raw, &h); err != nil {
		return "", time.Time{}, fmt.Errorf("decoding event: %w", err)
	}
	if h.Kind == "" {
		return "", time.Time{}, errors.New("decoding event: no kind")
	}
	if h.TS.IsZero() {
		return "", time.Time{}, errors.New("decoding event: no ts")
	}
	return h.Kind, h.TS, nil
}
