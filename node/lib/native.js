'use strict';
// The native addon (agentstate.node beside package.json): built by scripts/install.js from
// the repository, or shipped prebuilt inside a packed tarball.
const path = require('node:path');

const file = path.join(__dirname, '..', 'agentstate.node');
let native;
try {
  native = require(file);
} catch (e) {
  const err = new Error(
    `cannot load the agentstate addon ${file}: ${e.message} — build it from the repository ` +
      '(`npm install ./node` with cargo on PATH, or `npm run build` in node/), or install a ' +
      'packed tarball made on this platform (`npm pack` in node/ after a build)'
  );
  err.code = 'ADDON_MISSING';
  throw err;
}
module.exports = native;
