'use strict';
// The native addon: from the repository, agentstate.node beside package.json (built from
// source by scripts/install.js); installed from npm, the package of this platform
// (@agentstate/node-<platform>, an optional dependency npm installs only where it matches, as
// napi-rs packages are laid out).
const fs = require('node:fs');
const path = require('node:path');

/** The platform packages we publish, by `<platform>-<arch>-<libc>`. */
const PREBUILT = {
  'linux-x64-gnu': '@agentstate/node-linux-x64-gnu',
  'linux-arm64-gnu': '@agentstate/node-linux-arm64-gnu',
  'linux-x64-musl': '@agentstate/node-linux-x64-musl',
  'linux-arm64-musl': '@agentstate/node-linux-arm64-musl',
  'darwin-x64': '@agentstate/node-darwin-x64',
  'darwin-arm64': '@agentstate/node-darwin-arm64',
};

/** This machine as a platform package names it: `linux-x64-gnu`, `linux-x64-musl`, `darwin-arm64`. */
function platformKey() {
  if (process.platform !== 'linux') return `${process.platform}-${process.arch}`;
  // Node built against glibc reports the glibc it runs on; on musl the field is absent.
  const glibc = process.report?.getReport?.().header?.glibcVersionRuntime;
  return `linux-${process.arch}-${glibc ? 'gnu' : 'musl'}`;
}

function load() {
  const local = path.join(__dirname, '..', 'agentstate.node');
  if (fs.existsSync(local)) return require(local);
  const key = platformKey();
  const pkg = PREBUILT[key];
  const fromSource =
    'or build it from the repository (`npm run build` in node/, with cargo on PATH, then ' +
    '`npm install ./node`)';
  if (!pkg) {
    throw addonError(
      `no prebuilt agentstate addon for ${key} (prebuilt: ${Object.keys(PREBUILT).join(', ')}): ${fromSource}`
    );
  }
  try {
    return require(pkg);
  } catch (e) {
    throw addonError(
      `cannot load the agentstate addon ${pkg}: ${e.message} — install it beside ` +
        `@agentstate/node (\`npm install ${pkg}\`; npm skips it when optional dependencies are ` +
        `omitted), ${fromSource}`
    );
  }
}

function addonError(message) {
  const err = new Error(message);
  err.code = 'ADDON_MISSING';
  return err;
}

module.exports = load();
