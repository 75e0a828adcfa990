// Package intel is sandtrail's offline threat intelligence: the OSV records
// of known-malicious packages (the MAL- records of the OpenSSF
// malicious-packages project, as its repository or osv.dev's per-ecosystem
// all.zip exports hold them), kept in a store beside the index, and what
// is done with them:
//
//   - [Store.Lookup] answers whether a name@version is listed, with the
//     resolver's version grammar of its ecosystem (ranges with
//     introduced/fixed/last_affected events, or a list of versions);
//   - [Guard] puts a known_malicious check in front of the mirror's policy,
//     so that the mirror hides a listed version from the metadata it serves
//     and refuses its artifact, naming the MAL id;
//   - [Hunt] searches the record's index for the sessions that installed or
//     fetched a listed version, or contacted one of a record's indicators
//     (domains, IP addresses, URLs, artifact hashes), and [Finding.Alert]
//     turns a match into the known_malicious alert that the re-hunt after an
//     import journals in the matching session.
//
// [ParseRecord] reads one OSV record; [Import] reads a tree, a zip or a
// directory of zips and replaces what the store holds for each record it
// reads (a withdrawn record removes it).
//
// Trust model: the records are untrusted input from outside the machine,
// chosen and supplied by root (`sandtrail intel import PATH`; no registry
// ships them, and sandtrail downloads nothing). They are parsed
// defensively (size caps, every field checked, fuzzed) and can only add
// refusals and findings: a record can make the mirror refuse a package or
// a hunt report a session, never allow anything the policy refuses. The
// store is a root-owned file (0600) in the daemon's data directory, whose
// writer is `sandtrail intel import`; anyone who can write it can make the
// mirror refuse packages, as anyone who can write the policy can. A hunt
// answers from the index, which holds only what the journal holds; an alert
// it raises is a new event with refs to the journaled evidence, and stays
// in the append-only journal even after its record is withdrawn (hunt then
// no longer reports the match).
package intel
