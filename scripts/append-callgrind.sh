#!/usr/bin/env bash
# Instructions per append, counted by callgrind (exact and repeatable, unlike timings on a
# shared machine; user space only: the kernel work of a request is not in it):
#   Redis: a private redis-server under callgrind runs B-append batches of session_batch.lua
#          (N of them) and N*B/3 lone append_message.lua calls, sent by redis-cli --pipe
#          (280-byte bodies, S sessions over P partitions, batch items taken from the sessions
#          in turn: W1's 64 sessions in batches of 32 are S=64 B=32, a cluster's partition
#          lane P=1): instructions per batched append and per lone append, from lua/ as it is
#          in the working tree.
#   client: examples/append_callgrind.rs under callgrind, 8 tasks x 1,000 appends through
#          one Store against a plain private redis-server: instructions per append.
# Figures only; nothing is asserted. Usage: scripts/append-callgrind.sh  (PORT, N, B, S, P from env)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-tools.sh redis-server redis-cli valgrind
PORT=${PORT:-6412}; N=${N:-200}; B=${B:-16}; S=${S:-16}; P=${P:-16}
TMP=$(mktemp -d)
trap 'redis-cli -p $PORT shutdown nosave >/dev/null 2>&1 || true; redis-cli -p $((PORT + 1)) shutdown nosave >/dev/null 2>&1 || true; rm -rf "$TMP"' EXIT

cargo build --release --locked --bin agentstate --example append_callgrind
BIN=${CARGO_TARGET_DIR:-target}/release
for name in create_session session_batch append_message; do
  "$BIN/agentstate" bench --print-script "$name" >"$TMP/$name.lua"
done

# The command files: RESP, so bodies and scripts go byte-exact.
python3 - "$TMP" "$N" "$B" "$S" "$P" <<'EOF'
import hashlib, sys
out, N, B, S, P = sys.argv[1], *map(int, sys.argv[2:6])
def script(name):
    # as the library runs it: built by the one loader (agentstate bench --print-script)
    return open(out + '/' + name + '.lua').read()
def resp(*args):
    parts = [b'*%d\r\n' % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        parts.append(b'$%d\r\n%s\r\n' % (len(a), a))
    return b''.join(parts)
def keys(sid, p):
    base = 'cg:{%d}:s:%s' % (p, sid)
    return [base] + [base + ':' + s for s in
                     ('work', 'msgs', 'ckpt', 'idem', 'compactions', 'usage', 'children')] \
        + ['cg:{%d}:wal' % p]
def gate(p):
    return 'cg:{%d}:committed' % p
sessions = [('sess%02d' % i, i % P) for i in range(S)]
tail = '"role":"user","content":"' + 'x' * 250 + '"}'   # a body without its opening brace
batch, lone = (hashlib.sha1(script(n).encode()).hexdigest() for n in ('session_batch', 'append_message'))
with open(out + '/setup.resp', 'wb') as f:
    for sid, p in sessions:
        # the partition's commit marker as a spill daemon leaves it: checked in this history
        f.write(resp('EVAL', "return redis.call('HSET', KEYS[1], 'history', string.match("
                     "redis.call('INFO', 'replication'), 'master_replid:(%x+)'))", 1, gate(p)))
        f.write(resp('EVAL', script('create_session'), 14, *keys(sid, p), 'cg:{%d}:sessions' % p,
                     'cg:{%d}:by_user:' % p, gate(p), 'cg:{%d}:sessions:buckets' % p,
                     'cg:{%d}:by_user::buckets' % p, sid, '', '', 0, 'root',
                     'ephemeral', '', '', '{}', '{}', 3600))
    for name in ('session_batch', 'append_message'):
        f.write(resp('SCRIPT', 'LOAD', script(name)))
with open(out + '/batch.resp', 'wb') as f:
    for _ in range(N):
        ks, args = [], []
        # grouped by partition, as the client sends a batch (a stable sort)
        for j in sorted(range(B), key=lambda j: sessions[j % S][1]):
            sid, p = sessions[j % S]
            k = keys(sid, p)
            ks += [k[0], k[2], k[4], k[8], gate(p)]   # a batched append's keys and its gate
            args += ['append', sid, tail, '', '', 65536, '']
        f.write(resp('EVALSHA', batch, len(ks), *ks, *args))
with open(out + '/lone.resp', 'wb') as f:
    for i in range(N * B // 3):
        sid, p = sessions[i % S]
        f.write(resp('EVALSHA', lone, 10, *keys(sid, p), gate(p), sid, tail, '', '', 65536, ''))
EOF

total() { callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'; }

echo "== Redis (redis-server under callgrind)"
valgrind --tool=callgrind --callgrind-out-file="$TMP/redis.%p" redis-server --port "$PORT" \
  --bind 127.0.0.1 --save '' --appendonly no >"$TMP/valgrind.log" 2>&1 &
VG=$!
until redis-cli -p "$PORT" ping >/dev/null 2>&1; do sleep 0.3; done
redis-cli -p "$PORT" --pipe <"$TMP/setup.resp" >/dev/null
for run in batch lone; do
  callgrind_control -z "$VG" >/dev/null 2>&1
  redis-cli -p "$PORT" --pipe <"$TMP/$run.resp" | grep -q 'errors: 0' || { echo "error: $run calls failed" >&2; exit 1; }
  callgrind_control -d "$run" "$VG" >/dev/null 2>&1
done
redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
wait "$VG" || true
files=("$TMP"/redis.*.*)
awk -v i="$(total "${files[0]}")" -v n=$((N * B)) -v b="$B" 'BEGIN { printf "batched append (%d-item batches): %.1fk instructions\n", b, i / n / 1000 }'
awk -v i="$(total "${files[1]}")" -v n=$((N * B / 3)) 'BEGIN { printf "lone append:                       %.1fk instructions\n", i / n / 1000 }'

echo "== client (examples/append_callgrind.rs under callgrind, 8 tasks x 1,000 appends)"
redis-server --port $((PORT + 1)) --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --logfile "$TMP/plain.log" >/dev/null
until redis-cli -p $((PORT + 1)) ping >/dev/null 2>&1; do sleep 0.2; done
URL=redis://127.0.0.1:$((PORT + 1))
"$BIN/agentstate" --redis "$URL" --prefix cg --db "$TMP/cg.db" spill --once >/dev/null 2>&1
valgrind --tool=callgrind --callgrind-out-file="$TMP/client.out" \
  "$BIN/examples/append_callgrind" "$URL" cg >/dev/null 2>&1
awk -v i="$(total "$TMP/client.out")" 'BEGIN { printf "append, this process:             %.1fk instructions (connect included)\n", i / 8000 / 1000 }'
