//! The examples shown at the end of each command's `--help` (`after_help`): one or two
//! command lines a person can run as printed, in the order of the CLI tour (docs/cli.md).

pub const TOP: &str = "\
Start here:
  agentstate demo                                   # the whole story in ~1 s, self-checking
  export AGENTSTATE_REDIS_URL=$(agentstate server --detach)   # a local Redis that keeps its data
  agentstate session create --id planner --user alice
  agentstate msg append planner --role user --content \"plan the release\"

Payload arguments (--content, --note, JSON values, ...) take TEXT, - (read stdin) or @FILE.
`agentstate <command> --help` shows each command's options and examples.";

pub const DEMO: &str = "\
Examples:
  agentstate demo                      # on a private redis-server when nothing answers on 6379
  agentstate --json demo | jq .passed  # one JSON document with every step and check";

pub const SERVER: &str = "\
Examples:
  agentstate server                                           # foreground; Ctrl-C stops it
  export AGENTSTATE_REDIS_URL=$(agentstate server --detach)   # in the background
  agentstate server --stop                                    # stop the background one";

pub const BENCH: &str = "\
Examples:
  agentstate bench --quick
  agentstate --json bench > bench.json";

pub const KEYS: &str = "\
Examples:
  agentstate keys planner
  agentstate --json keys planner     # JSON lines {\"key\",\"type\",\"ttl\"}";

pub const COMPACT: &str = "\
Prints `COMPACT_SEQ NOTE_SEQ`: the compaction's number (1 for the session's first) and the
seq of the system note that replaces the range.

Examples:
  agentstate compact planner --from 1 --to 40 --note \"user wants a release plan\"
  agentstate compact planner --from 41 --to 80 --note @summary.txt --before-tokens 9000 --after-tokens 300";

pub const USAGE: &str = "\
Examples:
  agentstate usage planner --round 1 --prompt 1200 --completion 300 --model gpt-4o   # -> 1500";

pub const DECIDE: &str = "\
Examples:
  agentstate decide planner --decision ship --rationale \"tests pass\" --action deploy
  agentstate decide planner --decision hold --rationale @why.txt --durable";

pub const OUTCOME: &str = "\
Examples:
  agentstate outcome 3:1795000000000-0 --outcome deployed";

pub const TAIL: &str = "\
Examples:
  agentstate tail --group deployer --consumer d1 --from-start --count 10
  agentstate tail --group audit --consumer a1 --no-ack      # follow; Ctrl-C stops";

pub const SPILL: &str = "\
Examples:
  agentstate spill &                      # logs one line at start and at stop
  agentstate spill --once                 # drain into SQLite and exit; prints what it did
  AGENTSTATE_LOG=debug agentstate spill   # every pass
  agentstate spill --metrics 127.0.0.1:9464   # Prometheus at /metrics, probes /healthz /readyz";

pub const UI: &str = "\
The console only reads: it shows sessions (live in Redis, or only in the durable tier), a
session's timeline (new messages and decisions appear as they are written), consumer groups
and dead letters, and spill lag per partition. Content agents wrote is shown as text.

Examples:
  agentstate ui                                    # http://127.0.0.1:8080/
  agentstate ui --listen 127.0.0.1:0               # any free port; prints the URL
  agentstate ui --listen 0.0.0.0:8080 --token \"$(openssl rand -hex 16)\"
  curl -H 'Authorization: Bearer TOKEN' http://host:8080/sessions";

pub const GC: &str = "\
Examples:
  agentstate gc --dry-run --keep-checkpoints 20 --drop-closed-after 30 --max-decisions 100000
  agentstate gc --keep-checkpoints 20          # removes what --dry-run listed; prints it
  agentstate spill --keep-checkpoints 20 --drop-closed-after 30   # the daemon applies it hourly";

pub const DB_COPY: &str = "\
Moving from SQLite to PostgreSQL:
  kill -TERM <pid of agentstate spill>      # it drains, commits and exits; agents go on
  agentstate --db ./agentstate.db db copy --to postgresql://agentstate:pw@db:5432/agentstate
  agentstate spill --db postgresql://agentstate:pw@db:5432/agentstate   # resumes at the cursors
Run it again after an interruption: rows already copied are kept, none twice.";

pub const RESTORE: &str = "\
Examples:
  agentstate restore planner
  agentstate restore --all      # after Redis lost its state";

pub const EXPORT: &str = "\
Examples:
  agentstate export planner > planner.jsonl";

pub const STATS: &str = "\
LAG MS is how long the oldest entry SQLite has not committed has waited (0 when nothing
waits): alert when it grows.

Examples:
  agentstate stats
  agentstate stats --watch                  # refresh every second; Ctrl-C stops
  agentstate --json stats --watch --interval-ms 5000 >> spill-figures.jsonl";

pub const SESSION_CREATE: &str = "\
Examples:
  agentstate session create --id planner --user alice --model gpt-4o
  agentstate session create --id worker1 --parent planner --lifecycle linked --system-prompt @worker.txt";

pub const SESSION_SHOW: &str = "\
Examples:
  agentstate session show planner           # an overview on a terminal
  agentstate session show planner | jq .    # the whole document when piped (or --json)";

pub const SESSION_LIST: &str = "\
Examples:
  agentstate session list --user alice
  agentstate session list --limit 100                # ... then `next: CURSOR` when more follow
  agentstate session list --limit 100 --after CURSOR # the following page
  agentstate --json session list            # JSON lines with user, kind, status, messages";

pub const SESSION_CLOSE: &str = "\
Examples:
  agentstate session close planner              # -> 2 (and its linked worker)
  agentstate session close planner --no-cascade # children are re-parented to none";

pub const SESSION_FORK: &str = "\
Examples:
  agentstate session fork planner --at 12 --id planner-retry   # -> planner-retry
  agentstate session fork graph-thread-7                        # a LangGraph thread, all checkpoints";

pub const SESSION_ARCHIVE: &str = "\
Examples:
  agentstate session archive planner            # -> archived";

pub const SESSION_TOUCH: &str = "\
Examples:
  agentstate session touch planner              # -> 3600 (the idle TTL it refreshed)";

pub const WORK_SET: &str = "\
Examples:
  agentstate work set planner plan '{\"step\":1}'               # -> 1 (the new version)
  agentstate work set planner plan '{\"step\":2}' --if-version 1
  some-tool | agentstate work set planner result -            # the value from stdin";

pub const WORK_GET: &str = "\
Examples:
  agentstate work get planner plan
  agentstate work get planner          # every key, one object";

pub const WORK_DEL: &str = "\
Examples:
  agentstate work del planner plan     # -> the new version";

pub const MSG_APPEND: &str = "\
Examples:
  agentstate msg append planner --role user --content \"plan the release\"
  agentstate msg append planner --role assistant --content - < answer.md
  agentstate msg append planner --role tool --tool-call-id call_1 --content @result.json
  agentstate msg append planner --role user --content hi --idempotency-key k1   # retry-safe";

pub const MSG_LIST: &str = "\
Examples:
  agentstate msg list planner --last 5
  agentstate msg list planner --all | jq -r .content";

pub const CHECKPOINT_CREATE: &str = "\
Examples:
  agentstate checkpoint create planner after-plan
  agentstate checkpoint create planner plan-only --keys plan --durable";

pub const CHECKPOINT_GET: &str = "\
Examples:
  agentstate checkpoint get planner after-plan
  agentstate checkpoint get planner --id ckpt_0123456789abcdef01234567";

pub const CHECKPOINT_LIST: &str = "\
Examples:
  agentstate checkpoint list planner";

pub const STATE_SAVE: &str = "\
Examples:
  agentstate state save alice '{\"turn\":1}'                 # -> 1
  agentstate state save alice @state.json --session chat --round 7";

pub const STATE_EXPORT: &str = "\
Examples:
  agentstate state export alice
  agentstate state export alice --session chat --round 7";

pub const DECISIONS_INCOMPLETE: &str = "\
Examples:
  agentstate decisions incomplete --session planner";

pub const USER_SET: &str = "\
Examples:
  agentstate user set alice tz '\"Europe/Paris\"'     # -> the Redis hash it wrote
  agentstate user set alice profile @profile.json";

pub const USER_GET: &str = "\
Examples:
  agentstate user get alice tz";

pub const MEMORY_PUT: &str = "\
Examples:
  agentstate memory put users.alice.prefs tz '{\"tz\": \"Europe/Paris\"}'
  agentstate memory put users.alice.facts f1 @fact.json --ttl 1440 --vector text='[0.1,0.9]'";

pub const MEMORY_GET: &str = "\
Examples:
  agentstate memory get users.alice.prefs tz
  agentstate memory get users.alice.facts f1 --refresh-ttl";

pub const MEMORY_SEARCH: &str = "\
Examples:
  agentstate memory search users.alice                       # newest first
  agentstate memory search users --filter '{\"kind\": \"fact\", \"score\": {\"$gte\": 3}}'
  agentstate --json memory search users.alice --query '[0.1,0.9]' --limit 5";

pub const MEMORY_LIST: &str = "\
Examples:
  agentstate memory list
  agentstate memory list users --max-depth 2
  agentstate memory list --suffix prefs";

pub const MEMORY_DELETE: &str = "\
Examples:
  agentstate memory delete users.alice.prefs tz";

pub const USER_FORGET: &str = "\
Examples:
  agentstate user forget alice                  # -> number of values removed
  agentstate --json user forget alice           # the full receipt";

pub const LEASE_ACQUIRE: &str = "\
Examples:
  agentstate lease acquire planner --owner worker-7 --ttl-ms 30000     # prints the token
  agentstate --json lease acquire planner --owner worker-7 --ttl-ms 30000";

pub const LEASE_RENEW: &str = "\
Examples:
  agentstate lease renew planner --owner worker-7 --token 1796544000123 --ttl-ms 30000";

pub const LEASE_RELEASE: &str = "\
Examples:
  agentstate lease release planner --owner worker-7 --token 1796544000123";

pub const LEASE_SHOW: &str = "\
Examples:
  agentstate lease show planner";

pub const INBOX_PUT: &str = "\
Examples:
  agentstate inbox put planner --item-id mail-42 --role user --content \"also check the docs\"";

pub const INBOX_CLAIM: &str = "\
Examples:
  agentstate inbox claim planner --owner worker-7 --token 1796544000123 --limit 10";

pub const INBOX_DELIVER: &str = "\
Examples:
  agentstate inbox deliver planner --owner worker-7 --token 1796544000123 mail-42 mail-43";

pub const INBOX_LIST: &str = "\
Examples:
  agentstate inbox list planner";

pub const INBOX_VOID: &str = "\
Examples:
  agentstate inbox void planner mail-43";

pub const EFFECTS_BEGIN: &str = "\
Examples:
  agentstate effects begin planner call_17 --args '{\"amount\":42}'
  agentstate effects begin planner call_17 --args '{\"amount\":42}' --fence \"$T\"   # T from `lease acquire`";

pub const EFFECTS_FINISH: &str = "\
Examples:
  agentstate effects finish planner call_17 --result '{\"charged\":true}'
  agentstate effects finish planner call_17 --result '{\"charged\":true}' --fence \"$T\"";

pub const EFFECTS_UNRESOLVED: &str = "\
Examples:
  agentstate effects unresolved planner";

pub const EFFECTS_LIST: &str = "\
Examples:
  agentstate effects list planner";
