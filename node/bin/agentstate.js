#!/usr/bin/env node
'use strict';
// `npx agentstate ...`: the agentstate command line, entered through the addon (the same
// program as the cargo-built binary and the Python wheel's command).
const native = require('../lib/native');

// npm (npx, npm exec, npm run) runs this through a shell it starts, and when npm is stopped it
// ends that shell, not its children: the command then stops with its parent (SIGTERM, handled
// as Ctrl-C is) instead of running on orphaned.
const parent = process.env.npm_lifecycle_event === undefined ? undefined : process.ppid;
process.exitCode = native.runCli(['agentstate', ...process.argv.slice(2)], parent);
