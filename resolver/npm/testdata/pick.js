// Differential oracle for BestWithTags: npm's own npm-pick-manifest over generated packuments.
// Usage: node pick.js NPM_DIR CASES_JSON  (writes one JSON array to stdout: a version or null)
'use strict'
const path = require('path')
const pick = require(path.join(process.argv[2], 'node_modules', 'npm-pick-manifest'))
const cases = JSON.parse(require('fs').readFileSync(process.argv[3], 'utf8'))
const out = cases.map((c) => {
  const versions = {}
  for (const v of c.versions) versions[v] = { name: 'p', version: v }
  try {
    const m = pick({ name: 'p', versions, 'dist-tags': c.tags }, c.spec)
    return m ? m.version : null
  } catch (e) {
    return null
  }
})
process.stdout.write(JSON.stringify(out))
