// Differential oracle: evaluates cases.json with the node-semver that npm itself ships.
// Usage: node oracle.js SEMVER_DIR CASES_JSON  (writes one JSON array to stdout)
'use strict'
const semver = require(process.argv[2])
const fs = require('fs')
const cases = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'))
const out = cases.map((c) => {
  const opts = { loose: c.loose, includePrerelease: c.incpre }
  if (c.kind === 'compare') {
    const va = semver.valid(c.a, opts) !== null
    const vb = semver.valid(c.b, opts) !== null
    return { valid_a: va, valid_b: vb, cmp: va && vb ? semver.compare(c.a, c.b, opts) : 0 }
  }
  let norm = null
  try { norm = new semver.Range(c.range, opts).range } catch (e) { norm = null }
  return {
    valid_range: norm !== null,
    norm: norm === null ? '' : norm,
    valid_version: semver.valid(c.version, opts) !== null,
    sat: semver.satisfies(c.version, c.range, opts),
  }
})
process.stdout.write(JSON.stringify(out))
