#!/usr/bin/env bash
# Proves the Dockerfile and docker-compose.yml with podman, on a machine without Docker or registry
# access (Debian: apt-get install podman podman-compose mmdebstrap):
#   1. builds the Dockerfile (podman build --format docker, so HEALTHCHECK is kept);
#   2. runs the image against the fake upstream: serves through it, runs as uid 1000, its
#      HEALTHCHECK passes, it stops on SIGTERM with exit code 0 well before the kill timeout;
#   3. brings docker-compose.yml up with podman-compose (etagere, redis, fake-upstream) and asks
#      the proxy through the compose network.
# Without podman (or where it cannot start a container) it says so and exits 0.
#
# Registry images cannot be pulled here, so it builds stand-ins with mmdebstrap when they are
# missing, tagged with the names the Dockerfile and compose use: node:20-slim (Debian trixie's
# nodejs 20 and npm, a `node` user uid 1000) and redis:7.4.2-alpine (Debian's redis-server). The
# machine's CA bundle is copied in, for npm behind a TLS-inspecting proxy.
set -euo pipefail
cd "$(dirname "$0")/../.."

skip() {
  echo "podman check skipped: $*"
  exit 0
}
log() { echo "podman check: $*"; }
# Without systemd, podman logs that it cannot time a HEALTHCHECK; that is all it means here.
no_timer_noise() { "$@" 2> >(grep -v 'unable to get systemd connection' >&2); }
fail() {
  echo "podman check FAILED: $*" >&2
  exit 1
}

command -v podman >/dev/null 2>&1 || skip "podman is not installed (apt-get install podman podman-compose mmdebstrap)"
command -v podman-compose >/dev/null 2>&1 || skip "podman-compose is not installed (apt-get install podman-compose)"

work=$(mktemp -d)
# podman's default ulimits cannot be set inside some sandboxes; keep the host's. crun refuses
# cgroups in hybrid mode with a controller on the v2 hierarchy ("cgroups in hybrid mode not
# supported"); runc (Debian package runc) does not, so use it where it is installed.
printf '[containers]\ndefault_ulimits = []\n' >"$work/containers.conf"
if command -v runc >/dev/null 2>&1; then printf '[engine]\nruntime = "runc"\n' >>"$work/containers.conf"; fi
export CONTAINERS_CONF="$work/containers.conf"
# What podman-compose's own `podman build` uses too.
export BUILDAH_ISOLATION=chroot BUILDAH_FORMAT=docker

NODE_IMAGE=docker.io/library/node:20-slim
REDIS_IMAGE=docker.io/library/redis:7.4.2-alpine
IMAGE=localhost/etagere:0.1.0
PROJECT=etagere-check
RUN=(podman run --ulimit host)
started=$SECONDS

remove_containers() {
  podman rm -f -t 0 etagere-check-proxy etagere-check-fake >/dev/null 2>&1 || true
  podman pod rm -f etagere-check-pod >/dev/null 2>&1 || true
  if [ -n "$(podman ps -aq --filter "label=io.podman.compose.project=$PROJECT" 2>/dev/null)" ]; then
    podman-compose -p "$PROJECT" down >/dev/null 2>&1 || true
  fi
  podman network rm -f "${PROJECT}_default" >/dev/null 2>&1 || true # podman-compose 1.0 leaves it
}
cleanup() {
  remove_containers
  rm -rf "$work"
}
trap cleanup EXIT

podman info >/dev/null 2>&1 || skip "podman info fails here: $(podman info 2>&1 | tail -1)"

# ---- stand-ins for the registry images
if ! podman image exists "$NODE_IMAGE"; then
  command -v mmdebstrap >/dev/null 2>&1 || skip "no $NODE_IMAGE and no mmdebstrap to build a stand-in"
  log "building a stand-in for $NODE_IMAGE (Debian trixie: nodejs 20, npm)"
  mmdebstrap --quiet --variant=minbase --include=nodejs,npm,ca-certificates \
    --customize-hook='chroot "$1" useradd --uid 1000 --user-group --create-home --shell /bin/sh node' \
    --customize-hook='copy-in /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs' \
    --format=tar trixie "$work/node.tar" ||
    skip "mmdebstrap could not build the trixie stand-in (no Debian mirror?)"
  podman import --quiet --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' --change 'CMD ["node"]' \
    "$work/node.tar" "$NODE_IMAGE" >/dev/null
  rm -f "$work/node.tar"
fi
if ! podman image exists "$REDIS_IMAGE"; then
  command -v mmdebstrap >/dev/null 2>&1 || skip "no $REDIS_IMAGE and no mmdebstrap to build a stand-in"
  log "building a stand-in for $REDIS_IMAGE (Debian bookworm: redis-server)"
  # Like the official image's entrypoint: a server started without a config file is reachable
  # from other containers (protected mode off).
  cat >"$work/entrypoint.sh" <<'EOF'
#!/bin/sh
if [ "$1" = redis-server ]; then set -- "$@" --protected-mode no; fi
exec "$@"
EOF
  mmdebstrap --quiet --variant=minbase --include=redis-server \
    --customize-hook="upload $work/entrypoint.sh /usr/local/bin/docker-entrypoint.sh" \
    --customize-hook='chmod 755 "$1/usr/local/bin/docker-entrypoint.sh"' \
    --format=tar bookworm "$work/redis.tar" ||
    skip "mmdebstrap could not build the bookworm stand-in (no Debian mirror?)"
  podman import --quiet --change 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' --change 'CMD ["redis-server"]' \
    "$work/redis.tar" "$REDIS_IMAGE" >/dev/null
  rm -f "$work/redis.tar"
fi
log "stand-ins ready ($((SECONDS - started)) s)"
probe=$("${RUN[@]}" --rm "$NODE_IMAGE" node -e 'console.log(process.version)' 2>&1) ||
  skip "podman cannot start a container here: $(echo "$probe" | tail -1) (with crun on hybrid cgroups: apt-get install runc)"
case "$probe" in v20.*) ;; *) fail "$NODE_IMAGE runs node $probe, not 20.x" ;; esac

remove_containers # what an interrupted run left

# ---- 1. the Dockerfile
t0=$SECONDS
podman build --quiet --pull=never --format docker --isolation chroot -t "$IMAGE" . >/dev/null ||
  fail "podman build of the Dockerfile"
log "image built ($((SECONDS - t0)) s)"
[ "$(podman image inspect --format '{{.Config.User}}' "$IMAGE")" = node ] || fail "the image's USER is not node"

# ---- 2. the image against the fake upstream, in one pod (they share localhost)
podman pod create --name etagere-check-pod -p 127.0.0.1::8080 >/dev/null
"${RUN[@]}" -d --pod etagere-check-pod --name etagere-check-fake --no-healthcheck "$IMAGE" \
  node dist/src/main/cli.js fake-upstream --port 9100 --host 127.0.0.1 >/dev/null
# No systemd here to time the HEALTHCHECK (interval disabled); `podman healthcheck run` runs it below.
no_timer_noise "${RUN[@]}" -d --pod etagere-check-pod --name etagere-check-proxy --health-interval disable \
  -e UPSTREAM_URL=http://127.0.0.1:9100 -e ETAGERE_TOKENS=alice=demo_token_alice_public \
  "$IMAGE" node dist/src/main/cli.js serve --config config/container.yaml >/dev/null
port=$(podman port "$(podman pod inspect --format '{{.InfraContainerID}}' etagere-check-pod)" 8080/tcp | head -1 | sed 's/.*://')
[ -n "$port" ] || fail "no host port for the pod's 8080"

get() { curl -sS --max-time 5 "$@"; }
for _ in $(seq 1 60); do
  get -o /dev/null "http://127.0.0.1:$port/rate_limit" 2>/dev/null && break
  sleep 0.5
done
body=$(get "http://127.0.0.1:$port/repos/octocat/hello-world") || fail "the proxy does not answer"
echo "$body" | grep -q '"full_name": *"octocat/hello-world"' || fail "not the fake's repository: $body"
stats=$(podman exec etagere-check-fake node -e \
  "fetch('http://127.0.0.1:9100/__fake/stats').then((r) => r.text()).then((t) => console.log(t))")
echo "$stats" | grep -q '"/repos/octocat/hello-world"' || fail "the fake saw no request for the repository: $stats"
log "serves /repos/octocat/hello-world through the fake upstream"

uid=$(podman exec etagere-check-proxy sh -c 'awk "/^Uid:/ {print \$2}" /proc/1/status')
[ "$uid" = 1000 ] || fail "the proxy runs as uid $uid, not 1000"
log "runs as uid 1000"

podman healthcheck run etagere-check-proxy >/dev/null || fail "the image's HEALTHCHECK fails"
log "HEALTHCHECK passes"

t0=$SECONDS
no_timer_noise podman stop -t 30 etagere-check-proxy >/dev/null
took=$((SECONDS - t0))
code=$(podman inspect --format '{{.State.ExitCode}}' etagere-check-proxy)
[ "$code" = 0 ] || fail "on SIGTERM the proxy exited with $code (137: killed after the timeout)"
[ "$took" -lt 20 ] || fail "on SIGTERM the proxy took ${took} s to stop"
log "stops on SIGTERM with exit code 0 in ${took} s"
no_timer_noise podman rm -f -t 0 etagere-check-proxy etagere-check-fake >/dev/null
podman pod rm -f etagere-check-pod >/dev/null

# ---- 3. docker-compose.yml with podman-compose (1.0 has no profiles: name the services)
for host_port in 8080 9090 9100; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$host_port") 2>/dev/null; then
    log "compose part skipped: 127.0.0.1:$host_port is in use on this machine ($((SECONDS - started)) s in all)"
    exit 0
  fi
done
# The fake's image is the same build; tag it so podman-compose does not build it again.
podman tag "$IMAGE" "localhost/${PROJECT}_fake-upstream"
UPSTREAM_URL=http://fake-upstream:9100 ETAGERE_TOKENS=alice=demo_token_alice_public,bob=demo_token_bob_public \
  podman-compose -p "$PROJECT" --podman-run-args='--ulimit host' up -d etagere redis fake-upstream >"$work/compose.log" 2>&1 ||
  fail "podman-compose up: $(tail -5 "$work/compose.log")"
ok=
for _ in $(seq 1 60); do
  if body=$(get "http://127.0.0.1:8080/repos/octocat/hello-world" 2>/dev/null) && echo "$body" | grep -q '"full_name": *"octocat/hello-world"'; then
    ok=1
    break
  fi
  sleep 0.5
done
[ -n "$ok" ] || fail "compose: the proxy on 127.0.0.1:8080 does not serve the fake's repository: ${body:-} $(podman logs "${PROJECT}_etagere_1" 2>&1 | tail -5)"
redis=$(get http://127.0.0.1:9090/metrics | grep '^etagere_redis_up' || true)
echo "$redis" | grep -q ' 1$' || fail "compose: etagere does not reach redis: $redis"
log "compose: etagere serves through fake-upstream, with redis up"
log "passed in $((SECONDS - started)) s"
