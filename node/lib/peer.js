'use strict';
// The frameworks the adapters build on are optional peer dependencies: loaded from the
// application (its working directory first, so `npm install ./node`'s symlinked package and
// the application share one copy of the framework), else from beside this package. A missing
// one leaves a stand-in class that says what to install.

/** The framework module `name`, or null when it is not installed. */
function peer(name) {
  for (const from of [process.cwd(), __dirname]) {
    let file;
    try {
      file = require.resolve(name, { paths: [from] });
    } catch {
      continue;
    }
    return require(file);
  }
  return null;
}

/** A base class whose constructor says that `pkg` must be installed to use `cls`. */
function missing(cls, pkg) {
  return class {
    constructor() {
      throw new Error(`${cls} needs ${pkg} — install it beside this package: npm install ${pkg}`);
    }
  };
}

module.exports = { peer, missing };
