'use strict';
// Framework ids onto agentstate ids (1-128 chars of [A-Za-z0-9._@+-]), the same mapping as the
// Python package's (agentstate/_ids.py), so both languages name a thread or session alike: an
// id that fits is used as is; any other maps to "h." + the first 40 hex chars of its SHA-256.
const crypto = require('node:crypto');

const PART = /^[A-Za-z0-9._+-]{1,128}$/;
const ROLE = /^[a-z_]{1,32}$/;

/** The agentstate form of one framework id (never contains "@"). */
function part(raw) {
  if (PART.test(raw) && !raw.startsWith('h.')) return raw;
  return 'h.' + crypto.createHash('sha256').update(raw, 'utf8').digest('hex').slice(0, 40);
}

/** A valid agentstate role from a framework's role/type string, else `fallback`. */
function role(candidate, fallback = 'item') {
  return typeof candidate === 'string' && ROLE.test(candidate) ? candidate : fallback;
}

module.exports = { part, role };
