#!/usr/bin/env bash
# A single etagere process (built dist/) in front of the fake, measured with wrk outside the
# harness: the "by hand" runs of BENCHMARKS.md.
#   npm run build && bench/by-hand.sh [--workers N] [--l1 false --redis URL] [--cpu-prof DIR] [--log-level L]
#                                     [--root DIR] [--path P] [--rewrite-body-urls true|false] [--header 'Name: value'] [--webhooks true|false]
#                                     [--pool N] [--equivalent true|false] [--keys true|false] [--zipf]
# Prints req/s of three 5 s runs (after a 2 s warm-up) of GET /repos/octocat/hello-world (or --path),
# 64 connections, and (one worker) the server's CPU per request: user+system time of the etagere
# process over each run (from /proc), divided by the requests wrk completed.
# --root DIR measures the built dist/ of another checkout (e.g. a git worktree of an older commit),
# with this checkout's fake upstream, so two versions can be run back to back.
# --header adds a request header to every request (e.g. 'Accept-Encoding: gzip', a gzip client; repeat it for more);
# the output also gives the body bytes of one response (curl's size_download, with the same header).
# --webhooks true turns the webhook receiver on (a secret, webhooks.owners ["*"]) with
# cache.webhook_fresh_seconds: 600 on the upstream: the hit path with webhooks configured.
# --pool N serves anonymous clients from a pool of the bench's first N fake tokens (bench/bench-tokens.ts,
# as the harness's pool cases), with pool.equivalent from --equivalent (default true); --keys true turns
# consumer keys on with the harness's one key (bench/cases.ts CONSUMER_KEY) and sends it as X-Etagere-Key.
# The harness's cases by hand: l1-hot-pool = --pool 2; l1-hot-pool50 = --pool 50 --equivalent false;
# l1-hot-keys = --pool 2 --keys true; l1-hot-redis = --redis URL; l1-hot-allon = all of
# --redis URL --pool 50 --equivalent false --keys true.
# --zipf drives the harness's Zipf 10k workload instead of one URL (--path?z=1..10000, the same seeded
# sequence, wrk cycling through it), after fetching all 10,000 URLs once: l1-zipf10k-warm by hand
# (add --header 'Accept-Encoding: gzip' for l1-zipf10k-warm-gzip).
set -euo pipefail
cd "$(dirname "$0")/.."
WORKERS=1 L1=true REDIS= PROF= LEVEL=info ROOT=. URL_PATH=/repos/octocat/hello-world REWRITE=false HEADER= HEADERS=() WEBHOOKS=false POOL=0 EQUIVALENT=true KEYS=false ZIPF=false
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) WORKERS=$2; shift 2 ;;
    --l1) L1=$2; shift 2 ;;
    --redis) REDIS=$2; shift 2 ;;
    --cpu-prof) PROF=$2; shift 2 ;;
    --log-level) LEVEL=$2; shift 2 ;;
    --root) ROOT=$2; shift 2 ;;
    --path) URL_PATH=$2; shift 2 ;;
    --rewrite-body-urls) REWRITE=$2; shift 2 ;;
    --header) HEADERS+=("$2"); HEADER="${HEADER:+$HEADER; }$2"; shift 2 ;;
    --webhooks) WEBHOOKS=$2; shift 2 ;;
    --pool) POOL=$2; shift 2 ;;
    --equivalent) EQUIVALENT=$2; shift 2 ;;
    --keys) KEYS=$2; shift 2 ;;
    --zipf) ZIPF=true; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
command -v wrk >/dev/null || { echo "wrk is needed (apt-get install wrk)" >&2; exit 2; }
# The CLI of --root: dist/src/main/cli.js, or dist/cli.js in a checkout from before src/ had floors.
ROOT_CLI="$ROOT/dist/src/main/cli.js"; [ -f "$ROOT_CLI" ] || ROOT_CLI="$ROOT/dist/cli.js"
[ -f dist/src/main/cli.js ] && [ -f "$ROOT_CLI" ] || { echo "run npm run build first (here and in --root)" >&2; exit 2; }
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
FAKE=$(free_port); PORT=$(free_port); ADMIN=$(free_port)
DIR=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$DIR"' EXIT
REDIS_LINE=
[ -n "$REDIS" ] && REDIS_LINE="redis: {url: \"$REDIS\", required: true}"
WEBHOOK_LINE= CACHE_LINE=
if [ "$WEBHOOKS" = true ]; then
  WEBHOOK_LINE='webhooks: {secret: "by-hand-webhook-secret-0123456789", owners: ["*"]}'
  CACHE_LINE=', cache: {webhook_fresh_seconds: 600}'
fi
POOL_LINE= KEYS_LINE= TOKENS_ENV= UPSTREAM_POOL=
if [ "$POOL" != 0 ]; then
  POOL_LINE="pool: {equivalent: $EQUIVALENT}"
  UPSTREAM_POOL=', token_pool: true'
  TOKENS_ENV=$(node --import tsx -e "import('./bench/bench-tokens.ts').then((m) => console.log(m.poolTokensEnv($POOL)))")
fi
CONSUMER_KEY=$(node --import tsx -e "import('./bench/cases.ts').then((m) => console.log(m.CONSUMER_KEY.value))")
[ "$KEYS" = true ] && KEYS_LINE="consumers: {enabled: true, keys: [{name: bench, value: \"$CONSUMER_KEY\"}]}"
cat > "$DIR/config.yaml" <<YAML
listen: {host: 127.0.0.1, port: $PORT}
admin: {host: 127.0.0.1, port: $ADMIN}
log: {level: $LEVEL}
workers: $WORKERS
cache: {l1: $L1}
$REDIS_LINE
$WEBHOOK_LINE
$POOL_LINE
$KEYS_LINE
upstreams:
  - {name: github, prefix: /, url: "http://127.0.0.1:$FAKE", rewrite_body_urls: $REWRITE$CACHE_LINE$UPSTREAM_POOL}
YAML
FAKE_TOKENS=$(node --import tsx -e "import('./bench/bench-tokens.ts').then((m) => console.log(m.fakeTokenSpec()))")
node dist/src/main/cli.js fake-upstream --port "$FAKE" --anon-limit 1000000000 --token-limit 1000000000 --tokens "$FAKE_TOKENS" > /dev/null 2>&1 &
ETAGERE_TOKENS=$TOKENS_ENV node ${PROF:+--cpu-prof --cpu-prof-dir=$PROF} "$ROOT_CLI" serve --config "$DIR/config.yaml" > /dev/null 2> "$DIR/stderr" &
SERVER=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$FAKE/zen" > /dev/null && break; sleep 0.1; done
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$ADMIN/readyz" > /dev/null && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$ADMIN/readyz" > /dev/null || { echo "etagere did not start:" >&2; cat "$DIR/stderr" >&2; exit 1; }
URL="http://127.0.0.1:$PORT$URL_PATH"
# The consumer key first, then the --header ones: a key that is not the request's last header, as clients send it.
HEADER_ARGS=()
[ "$KEYS" = true ] && HEADER_ARGS+=(-H "X-Etagere-Key: $CONSUMER_KEY")
for extra in "${HEADERS[@]}"; do HEADER_ARGS+=(-H "$extra"); done
curl -s -o /dev/null "${HEADER_ARGS[@]}" "$URL"
BYTES=$(curl -s -o "$DIR/body" -w '%{size_download}' "${HEADER_ARGS[@]}" "$URL")
SCRIPT_ARGS=()
if [ "$ZIPF" = true ]; then
  # The harness's l1-zipf10k-warm sequence (bench/cases.ts), one path a line; every URL fetched once first.
  node --import tsx -e "import('./bench/zipf.ts').then((m) => console.log(m.zipfPaths({prefix: '$URL_PATH?z=', keys: 10000, exponent: 1, samples: 200000, seed: 0x5eed}).join('\\n')))" > "$DIR/paths"
  for i in $(seq 10000); do echo "url = \"$URL?z=$i\""; echo 'output = /dev/null'; done > "$DIR/warm"
  # No Accept header, as wrk sends none: GitHub varies on Accept, so curl's default */* would warm other entries.
  curl -s -K "$DIR/warm" -H 'Accept:' "${HEADER_ARGS[@]}"
  cat > "$DIR/zipf.lua" <<LUA
reqs, n, i = {}, 0, 0
init = function(args)
  for line in io.lines("$DIR/paths") do n = n + 1; reqs[n] = wrk.format("GET", line) end
end
request = function() i = i % n + 1; return reqs[i] end
LUA
  SCRIPT_ARGS=(-s "$DIR/zipf.lua")
fi
wrk -t1 -c64 -d2s "${HEADER_ARGS[@]}" "${SCRIPT_ARGS[@]}" "$URL" > /dev/null
# utime + stime of the server process, in clock ticks (fields 14 and 15 of /proc/PID/stat).
ticks() { awk '{print $14 + $15}' "/proc/$SERVER/stat"; }
HZ=$(getconf CLK_TCK)
# Requests the fake upstream has answered (its /__fake/stats), to show the runs are hits.
upstream() { curl -sf "http://127.0.0.1:$FAKE/__fake/stats" | node -e 'let s="";process.stdin.on("data",(d)=>(s+=d)).on("end",()=>console.log(JSON.parse(s).total))'; }
UP_BEFORE=$(upstream)
RPS= CPU=
for _ in 1 2 3; do
  BEFORE=$(ticks)
  OUT=$(wrk -t1 -c64 -d5s "${HEADER_ARGS[@]}" "${SCRIPT_ARGS[@]}" "$URL")
  AFTER=$(ticks)
  RPS="$RPS$(echo "$OUT" | awk '/Requests\/sec/ {printf "%s ", $2}')"
  DONE=$(echo "$OUT" | awk '/requests in/ {print $1}')
  CPU="$CPU$(awk -v t=$((AFTER - BEFORE)) -v hz="$HZ" -v n="$DONE" 'BEGIN {printf "%.1f ", t / hz * 1e6 / n}') "
done
echo "${RPS}req/s (workers $WORKERS, l1 $L1, log $LEVEL, rewrite_body_urls $REWRITE, webhooks $WEBHOOKS, pool $POOL equivalent $EQUIVALENT, keys $KEYS, zipf $ZIPF, ${HEADER:-no extra header}, $ROOT)"
echo "$BYTES body bytes a response ($URL_PATH): $(head -c 100 "$DIR/body" | tr -c "[:print:]" ".")"
[ "$WORKERS" = 1 ] && echo "${CPU}CPU us/request of the server process"
echo "$(($(upstream) - UP_BEFORE)) upstream requests during the runs"
kill -INT "$SERVER"; wait "$SERVER" 2>/dev/null || true
