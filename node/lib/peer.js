'use strict';
// The frameworks the adapters build on are optional peer dependencies: loaded from the
// application (its working directory first, so `npm install ./node`'s symlinked package and
// the application share one copy of the framework), else from beside this package. A missing
// one leaves a stand-in class that says what to install. A framework shipping a CommonJS and
// an ESM build has a class identity per build, so each entry point of this package loads the
// build its importer gets (peer for CommonJS, peerEsmPath for ESM).
const fs = require('node:fs');
const path = require('node:path');

/** The file `require(name)` loads for the application, or null when it is not installed. */
function peerPath(name) {
  for (const from of [process.cwd(), __dirname]) {
    try {
      return require.resolve(name, { paths: [from] });
    } catch {
      continue;
    }
  }
  return null;
}

/** The framework module `name` (its CommonJS build), or null when it is not installed. */
function peer(name) {
  const file = peerPath(name);
  return file ? require(file) : null;
}

/**
 * The file `import(name)` loads for the application (its package.json "exports" `.` import
 * condition, else "module", else the CommonJS file), or null when it is not installed: the
 * package found where peer finds it.
 */
function peerEsmPath(name) {
  const cjs = peerPath(name);
  if (!cjs) return null;
  let dir = path.dirname(cjs);
  for (;;) {
    const manifest = path.join(dir, 'package.json');
    if (fs.existsSync(manifest)) {
      const pkg = JSON.parse(fs.readFileSync(manifest, 'utf8'));
      if (pkg.name === name) {
        const dot = pkg.exports && typeof pkg.exports === 'object' && '.' in pkg.exports ? pkg.exports['.'] : pkg.exports;
        const imp = dot && typeof dot === 'object' ? dot.import : undefined;
        const file = typeof imp === 'string' ? imp : imp && typeof imp === 'object' ? imp.default : pkg.module;
        return typeof file === 'string' ? path.join(dir, file) : cjs;
      }
    }
    const up = path.dirname(dir);
    if (up === dir) return cjs;
    dir = up;
  }
}

/** A base class whose constructor says that `pkg` must be installed to use `cls`. */
function missing(cls, pkg) {
  return class {
    constructor() {
      throw new Error(`${cls} needs ${pkg} — install it beside this package: npm install ${pkg}`);
    }
  };
}

module.exports = { peer, peerPath, peerEsmPath, missing };
