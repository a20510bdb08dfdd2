#!/usr/bin/env node
'use strict';
// `npm run build`. Inside the agentstate repository (the package is its node/ folder) it
// writes the ESM declarations and builds the addon from source (`cargo build --release
// --locked -p agentstate-node`), copied to agentstate.node with its debug info stripped: the
// way to the addon on a platform with no prebuilt package (scripts/build-node.sh builds the
// platform packages' instead). In an installed copy it only checks that the addon loads.
// The published package runs no install script: the addon comes prebuilt in this platform's
// package (@agentstate/node-linux-x64-gnu, ...), an optional dependency npm installs.
// AGENTSTATE_NODE_SKIP_BUILD=1 skips the build.
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync, spawnSync } = require('node:child_process');

const pkg = path.resolve(__dirname, '..');
const root = path.dirname(pkg);
const addon = path.join(pkg, 'agentstate.node');
const inRepo = fs.existsSync(path.join(root, 'Cargo.toml')) && fs.existsSync(path.join(pkg, 'Cargo.toml'));

/**
 * The ESM twins of the declarations (index.d.mts, ...): the same text, its relative imports
 * pointing at the twins, so an ESM program resolves the frameworks' types as ESM too (a
 * CommonJS declaration would mix their CommonJS and ESM types).
 */
function declarationsForEsm() {
  for (const name of ['index', 'langgraph', 'openai-agents']) {
    const text = fs.readFileSync(path.join(pkg, `${name}.d.ts`), 'utf8');
    const esm = text.replace(/from '\.\/(index|langgraph|openai-agents)'/g, "from './$1.mjs'");
    fs.writeFileSync(path.join(pkg, `${name}.d.mts`), esm);
  }
}

if (inRepo) declarationsForEsm();
if (process.env.AGENTSTATE_NODE_SKIP_BUILD === '1') process.exit(0);
if (!inRepo) {
  try {
    require('../lib/native');
    process.exit(0);
  } catch (e) {
    console.error(`error: ${e.message}`);
    process.exit(1);
  }
}

const cargo = spawnSync('cargo', ['--version'], { stdio: 'ignore' });
if (cargo.error || cargo.status !== 0) {
  if (fs.existsSync(addon)) process.exit(0); // built before: keep it
  console.error('error: building the agentstate addon needs cargo (https://rustup.rs)');
  process.exit(1);
}
execFileSync('cargo', ['build', '--release', '--locked', '-p', 'agentstate-node'], {
  cwd: root,
  stdio: 'inherit',
});
const target = process.env.CARGO_TARGET_DIR
  ? path.resolve(root, process.env.CARGO_TARGET_DIR)
  : path.join(root, 'target');
const lib = { darwin: 'libagentstate_node.dylib', win32: 'agentstate_node.dll' }[process.platform] || 'libagentstate_node.so';
fs.copyFileSync(path.join(target, 'release', lib), addon);
// The release profile keeps line tables for profiling (debug = 1): 150 MB of them here.
spawnSync('strip', ['--strip-debug', addon], { stdio: 'ignore' });
