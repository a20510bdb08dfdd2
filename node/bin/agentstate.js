#!/usr/bin/env node
'use strict';
// `npx agentstate ...`: the agentstate command line, entered through the addon (the same
// program as the cargo-built binary and the Python wheel's command).
const native = require('../lib/native');

process.exitCode = native.runCli(['agentstate', ...process.argv.slice(2)]);
