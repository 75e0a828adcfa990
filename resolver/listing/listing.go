// Package listing is the one parser of each document in which a package
// registry lists a package's versions: the three protocols of
// [resolver.Listing]. They are
//
//   - npm's packument, the full package document (ParsePackument), with
//     the registry's name rule for npm packages (CheckNpmName);
//   - a project page of PyPI's JSON simple API (PEP 691, with PEP 700's
//     versions and upload-time: ParseProject), with the versions of its
//     distribution file names (FileVersion);
//   - a crates sparse-index file (RFC 2789: ParseCrateIndex), the index's
//     config.json (ParseCrateConfig), its download template
//     (CrateDownloadURL) and paths (CrateIndexPath), and crates.io's name
//     rule (CheckCrateName).
//
// Two programs read these documents, and both read them through this
// package: the mirror (registry-mirror/npm, pypi and crates), which serves
// them filtered and verifies each artifact against what they say, and
// policies/release, which reads the versions and their publish times for
// `sandtrail policy explain` and the daemon's pre-install check. Each type
// carries what both need; each of them derives its own view from it.
//
// Why here: the policies are below the mirror, so the parsers cannot live in
// the mirror, and they need the resolver's registry (PEP 503 names, the
// ecosystems' name checks) and its version grammars (npm, cargo, PEP 440).
// The grammar packages cannot import the registry, which imports them, and a
// document format is not a version grammar; so the formats are one leaf of
// their own, beside the grammars, named for the registry's Listing that says
// which ecosystem speaks which.
//
// Trust model: registry documents are untrusted input (the upstream may be
// compromised, or not the registry at all). Every parser reads strictly,
// never panics, and has a fuzz target. A document that cannot be read as a
// whole is an error. An entry that cannot be read (a file of another project,
// an index line whose cksum is not sha256) is left out, and a publish time
// that cannot be read is left unknown, and the result says so (TimeErr,
// CrateIndex.Bad and Err): the mirror then serves only what it can attribute
// and decide on, and release refuses a document that is not whole.
package listing
