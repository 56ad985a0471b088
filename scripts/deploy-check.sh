#!/usr/bin/env bash
# Checks the deployment files (deploy/, docs/DEPLOY.md) on this machine,
# which has no Kubernetes cluster and no systemd as PID 1:
#
#   1. systemd-analyze verify of deploy/*.service, in a --root that holds
#      the units, systemd's own and a stub /usr/local/bin/sandbox-run and
#      nats-server; any line it prints is a failure.
#   2. helm lint --strict and helm template of deploy/helm/sandbox-run with
#      the default values, with ci-values.yaml, with an external NATS
#      (nats.enabled=false), and with the files of a fresh
#      `sandbox-run cluster init` made into values as docs/DEPLOY.md says;
#      values that must be refused (a wrong worker.kind, ...) are.
#   3. Every render through deploy/helm/check: strict decoding into the
#      typed structs of k8s.io/api (unknown fields, wrong types, unknown
#      apiVersion/kind are errors) and the references between objects
#      (selectors, ports, volumes, Secrets, $(VAR)s). Then through
#      kubeconform -strict, against JSON schemas that deploy/helm/check
#      -schemas generates from the same k8s.io/api v0.37.0 types (the
#      upstream kubernetes-json-schema files are downloaded from the
#      internet; these are made here, offline): every object must be Valid,
#      none skipped. Both must reject renders broken on purpose (an unknown
#      field in a Deployment's container, its replicas a string).
#   4. Which pod gets which credentials: api.creds only in the API pods,
#      worker.creds only in the workers, the NATS secrets only in NATS.
#   5. The NATS configuration the chart renders: nats-server -t on it with
#      the environment the pod would get, then three servers from it on
#      loopback (only ports, paths and route hosts changed) with cluster
#      init's auth.conf: the routes form with the password from the Secret,
#      a wrong route password and a client without credentials are refused,
#      JetStream is encrypted; an API node and a worker with cluster init's
#      api.creds and worker.creds get ready through them and run a program.
#
# Not run here: nothing is installed into a Kubernetes cluster (there is
# none), no image is built or pulled, the units are not started (no
# systemd), kubeconform does not use the upstream schemas (it cannot
# download them; the generated ones stand in).
#
# Tools, built when missing and reused: helm v3.22.0 and kubeconform v0.8.0
# from the Go module proxy into ~/.cache/sandbox-run-test/bin; the validator
# (deploy/helm/check, its own module); nats-server (go.mod's tool) and
# sandbox-run from this checkout. Idempotent, no stdin; exits non-zero on
# any failure. Everything temporary is removed at exit; the processes it
# started are stopped by their PIDs.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
export GOWORK=off

HELM_VERSION=v3.22.0
KUBECONFORM_VERSION=v0.8.0
CHART=deploy/helm/sandbox-run
RELEASE=sr
bindir=${XDG_CACHE_HOME:-$HOME/.cache}/sandbox-run-test/bin
mkdir -p "$bindir"

tmp=$(mktemp -d /tmp/deploy-check.XXXXXX)
pids=()
cleanup() {
	local rc=$? p
	for p in "${pids[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		for _ in $(seq 100); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ran=()
notrun=()
step() { printf '\ndeploy-check: == %s\n' "$*"; }
ok() {
	echo "deploy-check: ok: $*"
	ran+=("$*")
}
skip() {
	echo "deploy-check: NOT RUN: $*"
	notrun+=("$*")
}
fail() {
	echo "deploy-check: FAIL: $*" >&2
	exit 1
}

step "tools"
for c in curl python3; do
	command -v "$c" >/dev/null || fail "$c is missing (apt-get install $c)"
done
# helm: installed under its version's name, so another pin builds anew.
helm=$bindir/helm-$HELM_VERSION
if [ ! -x "$helm" ]; then
	echo "deploy-check: building helm $HELM_VERSION from the Go module proxy (once; a few minutes)"
	CGO_ENABLED=0 GOBIN=$tmp/gobin GOFLAGS=-mod=mod go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
	cp "$tmp/gobin/helm" "$helm.$$"
	mv -f "$helm.$$" "$helm"
fi
# helm keeps nothing of ours outside $tmp (no repositories: the NATS chart
# is vendored).
export HELM_CACHE_HOME=$tmp/helm/cache HELM_CONFIG_HOME=$tmp/helm/config HELM_DATA_HOME=$tmp/helm/data
echo "deploy-check: helm $("$helm" version --template '{{.Version}}') ($helm)"
# kubeconform: the same way, under its version's name.
kubeconform=$bindir/kubeconform-$KUBECONFORM_VERSION
if [ ! -x "$kubeconform" ]; then
	echo "deploy-check: building kubeconform $KUBECONFORM_VERSION from the Go module proxy (once)"
	CGO_ENABLED=0 GOBIN=$tmp/gobin GOFLAGS=-mod=mod go install "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION"
	cp "$tmp/gobin/kubeconform" "$kubeconform.$$"
	mv -f "$kubeconform.$$" "$kubeconform"
fi
# (Its -v says "development" when built by go install: the module's
# version is in the binary's build information.)
kc_info=$(go version -m "$kubeconform" 2>&1 || true)
grep -q "mod[[:space:]]*github.com/yannh/kubeconform[[:space:]]*$KUBECONFORM_VERSION" <<<"$kc_info" ||
	fail "$kubeconform is not kubeconform $KUBECONFORM_VERSION (remove it to build it anew)"
echo "deploy-check: kubeconform $KUBECONFORM_VERSION ($kubeconform)"
check=$tmp/helm-check
# CGO off as helm's build: the Kubernetes packages they share compile once.
(cd deploy/helm/check && CGO_ENABLED=0 go build -o "$check" .)
echo "deploy-check: validator built from deploy/helm/check"
# kubeconform's schemas, from the validator's k8s.io/api types; it prints
# the -schema-location that finds them.
schema_location=$("$check" -schemas "$tmp/schemas" 2>"$tmp/schemas.out") || {
	cat "$tmp/schemas.out" >&2
	fail "deploy/helm/check -schemas"
}
cat "$tmp/schemas.out"
k8s_api=$(sed -n 's|.* from k8s.io/api \(v[^ ]*\) in .*|\1|p' "$tmp/schemas.out")
[ -n "$k8s_api" ] || fail "deploy/helm/check -schemas does not say which k8s.io/api it used"
for f in deployment-apps-v1 daemonset-apps-v1 statefulset-apps-v1 service-v1 configmap-v1 secret-v1 \
	serviceaccount-v1 pod-v1 poddisruptionbudget-policy-v1; do
	[ -s "$tmp/schemas/$f.json" ] || fail "deploy/helm/check -schemas wrote no $f.json"
done
ok "kubeconform's JSON schemas generated from k8s.io/api $k8s_api's types: $(find "$tmp/schemas" -name '*.json' | wc -l) kinds"
nats_server=$(go tool -n nats-server)
echo "deploy-check: $("$nats_server" --version)"
go build -o "$tmp/sandbox-run" ./cmd/sandbox-run
sr=$tmp/sandbox-run

step "1. systemd units"
if ! command -v systemd-analyze >/dev/null && [ "${CI:-}" = true ]; then
	# Debian's systemd package has it; nothing is started.
	(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd >/dev/null) ||
		echo "deploy-check: could not install systemd (for systemd-analyze)"
fi
if command -v systemd-analyze >/dev/null; then
	sd=$tmp/sdroot
	mkdir -p "$sd/etc/systemd/system" "$sd/usr/local/bin" "$sd/usr/bin" "$sd/usr/lib/systemd" "$sd/etc/sandbox-run" "$sd/etc/nats"
	# systemd's own units (the targets ours are ordered after), stubs for
	# the commands the units run, and the file they read.
	cp -a /usr/lib/systemd/system "$sd/usr/lib/systemd/"
	ln -s usr/lib "$sd/lib"
	ln -s usr/bin "$sd/bin"
	for b in usr/local/bin/sandbox-run usr/local/bin/nats-server usr/bin/kill; do
		printf '#!/bin/sh\n' >"$sd/$b"
		chmod 0755 "$sd/$b"
	done
	cp deploy/cluster.env.example "$sd/etc/sandbox-run/cluster.env"
	units=()
	for u in deploy/*.service; do
		cp "$u" "$sd/etc/systemd/system/"
		units+=("/etc/systemd/system/$(basename "$u")")
	done
	# It exits 0 after warnings (an unknown key, a bad value): any output
	# is a failure.
	out=$(systemd-analyze verify --root="$sd" "${units[@]}" 2>&1) || fail "systemd-analyze verify: $out"
	[ -z "$out" ] || fail "systemd-analyze verify: $out"
	ok "systemd-analyze verify: ${units[*]##*/}"
else
	skip "systemd-analyze verify (systemd-analyze is not installed)"
fi

step "2-4. the chart: lint, template, manifests"
# render NAME ARGS...: helm lint --strict and helm template with ARGS into
# $tmp/NAME.yaml.
render() {
	local name=$1
	shift
	"$helm" lint --strict "$CHART" "$@" >"$tmp/$name.lint" 2>&1 || {
		cat "$tmp/$name.lint" >&2
		fail "helm lint ($name)"
	}
	"$helm" template "$RELEASE" "$CHART" "$@" >"$tmp/$name.yaml" 2>"$tmp/$name.err" || {
		cat "$tmp/$name.err" >&2
		fail "helm template ($name)"
	}
	ok "helm lint --strict and helm template ($name): $(grep -c '^kind:' "$tmp/$name.yaml") objects"
}
# kc FILE: kubeconform -strict with the generated schemas.
kc() {
	"$kubeconform" -strict -summary -schema-location "$schema_location" "$@"
}
# validate NAME ARGS...: the render through the validator, then through
# kubeconform, which must find every object of it valid (none skipped).
validate() {
	local name=$1 n summary
	shift
	"$check" "$@" "$tmp/$name.yaml" || fail "the manifests of $name (above)"
	ok "manifests of $name: strict decoding and references"
	kc "$tmp/$name.yaml" >"$tmp/$name.kc" 2>&1 || {
		cat "$tmp/$name.kc" >&2
		fail "kubeconform -strict on $name"
	}
	n=$(grep -c '^kind:' "$tmp/$name.yaml")
	summary=$(grep '^Summary:' "$tmp/$name.kc") || {
		cat "$tmp/$name.kc" >&2
		fail "kubeconform printed no summary for $name"
	}
	case $summary in *"Valid: $n, Invalid: 0, Errors: 0, Skipped: 0") ;; *)
		cat "$tmp/$name.kc" >&2
		fail "kubeconform on $name: not all $n objects valid"
		;;
	esac
	ok "kubeconform -strict ($name): $summary"
}

render default
validate default

render ci -f "$CHART/ci-values.yaml"
# Every Secret a pod names is made by the chart here, but for the two that
# ci-values.yaml names as made outside it.
validate ci -secrets-rendered -external registry,nats-client-tls

render external-nats --set nats.enabled=false --set-string 'natsUrl=tls://nats-a:4222\,tls://nats-b:4222' \
	--set natsClientTLS.secretName=nats-ca
validate external-nats
if grep -q 'kind: StatefulSet' "$tmp/external-nats.yaml"; then
	fail "nats.enabled=false still renders the NATS StatefulSet"
fi

# cluster init's files, made into the chart's values as docs/DEPLOY.md does
# with kubectl (the same sed commands).
# (Its help read whole first: with pipefail, grep -q quitting at the first
# match can make the writer's SIGPIPE fail the pipeline.)
init_help=$("$sr" cluster init --help 2>&1 || true)
if grep -q -- '--dir' <<<"$init_help"; then
	init=$tmp/init
	"$sr" cluster init --dir "$init" >/dev/null
	js_key=$(sed -n 's/^ *key: "\(.*\)"$/\1/p' "$init/nats-1.conf")
	route_user=$(sed -n 's/^ *authorization { user: "\([^"]*\)", password: "[^"]*" }$/\1/p' "$init/nats-1.conf")
	route_pass=$(sed -n 's/^ *authorization { user: "[^"]*", password: "\([^"]*\)" }$/\1/p' "$init/nats-1.conf")
	if [ -z "$js_key" ] || [ -z "$route_user" ] || [ -z "$route_pass" ]; then
		fail "docs/DEPLOY.md's commands find no JetStream key or route credentials in cluster init's nats-1.conf: its format changed"
	fi
	render init --set natsAuth.create=true --set-file natsAuth.authConf="$init/auth.conf" \
		--set-string natsAuth.jetstreamKey="$js_key" --set-string natsAuth.clusterUser="$route_user" \
		--set-string natsAuth.clusterPassword="$route_pass" \
		--set-file credentials.api.contents="$init/api.creds" --set-file credentials.worker.contents="$init/worker.creds" \
		--set-string apiKeys.apiKeys=ci=deploy-check-key
	validate init -secrets-rendered
	nats_render=init

	# docs/DEPLOY.md's edits of nats-N.conf for three hosts (the same sed),
	# then nats-server -t on each.
	cp -r "$init" "$tmp/hosts"
	for i in 1 2 3; do
		sed -i -e "s|listen: \"127.0.0.1:$((4221 + i))\"|listen: \"0.0.0.0:4222\"|" \
			-e "s|listen: \"127.0.0.1:$((6221 + i))\"|listen: \"0.0.0.0:6222\"|" \
			-e 's|@127.0.0.1:6222"|@nats1:6222"|g; s|@127.0.0.1:6223"|@nats2:6222"|g; s|@127.0.0.1:6224"|@nats3:6222"|g' \
			-e 's|store_dir: ".*"|store_dir: "/var/lib/nats/jetstream"|' "$tmp/hosts/nats-$i.conf"
		if ! grep -q '"0.0.0.0:6222"' "$tmp/hosts/nats-$i.conf" || grep -q '127.0.0.1' "$tmp/hosts/nats-$i.conf"; then
			fail "docs/DEPLOY.md's edits leave nats-$i.conf on 127.0.0.1: cluster init's format changed"
		fi
		"$nats_server" -t -c "$tmp/hosts/nats-$i.conf" >"$tmp/hosts/t.out" 2>&1 || {
			cat "$tmp/hosts/t.out" >&2
			fail "nats-server -t on nats-$i.conf as docs/DEPLOY.md edits it"
		}
	done
	ok "cluster init's nats-N.conf edited for three hosts as docs/DEPLOY.md says: nats-server -t"
else
	skip "a render with cluster init's files ($sr has no 'cluster init'): the NATS checks use ci-values.yaml's fixture"
	init=
	nats_render=ci
fi

# Values that must be refused.
for bad in "--set worker.kind=StatefulSet" "--set nats.enabled=false" "--set natsAuth.create=true"; do
	# shellcheck disable=SC2086 # word splitting wanted
	if "$helm" template "$RELEASE" "$CHART" $bad >/dev/null 2>&1; then
		fail "helm template accepted $bad"
	fi
done
ok "helm template refuses a wrong worker.kind, no NATS at all, natsAuth.create without its files"

# Both validators must see a broken render: an unknown field in the API
# Deployment's container; its replicas a string.
awk '/^        - name: api$/ && !done { print; print "          bogusField: 1"; done = 1; next } { print }' \
	"$tmp/ci.yaml" >"$tmp/broken-field.yaml"
grep -q bogusField "$tmp/broken-field.yaml" || fail "the API container is not where this script breaks it"
awk '/^kind: Deployment$/ { dep = 1 } dep && /^  replicas: [0-9]+$/ && !done { sub(/[0-9]+$/, "\"&\""); done = 1 } { print }' \
	"$tmp/ci.yaml" >"$tmp/broken-type.yaml"
grep -q '^  replicas: "[0-9]*"$' "$tmp/broken-type.yaml" || fail "the Deployment's replicas are not where this script breaks them"
# rejected NAME WHAT CHECK-SAYS KUBECONFORM-SAYS: both fail on
# $tmp/NAME.yaml, each saying what it should (extended regular expressions).
rejected() {
	if "$check" "$tmp/$1.yaml" >"$tmp/$1.out" 2>&1; then
		cat "$tmp/$1.out"
		fail "the validator accepted $2"
	fi
	grep -E -q "$3" "$tmp/$1.out" || {
		cat "$tmp/$1.out"
		fail "the validator failed $2, but not for it"
	}
	ok "the validator rejects $2 ($(grep -E -m1 -o "$3" "$tmp/$1.out"))"
	if kc "$tmp/$1.yaml" >"$tmp/$1.kc" 2>&1; then
		cat "$tmp/$1.kc"
		fail "kubeconform accepted $2"
	fi
	if ! grep -E -q "$4" "$tmp/$1.kc" || ! grep -q 'Invalid: 1, Errors: 0, Skipped: 0$' "$tmp/$1.kc"; then
		cat "$tmp/$1.kc"
		fail "kubeconform failed $2, but not (only) for it"
	fi
	ok "kubeconform -strict rejects $2 ($(grep -E -m1 -o "$4" "$tmp/$1.kc"))"
}
rejected broken-field "a Deployment with an unknown field" 'unknown field "[^"]*bogusField"' \
	"at '/spec/template/spec/containers/0': additional properties 'bogusField' not allowed"
rejected broken-type "a Deployment with replicas a string" 'cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32' \
	"at '/spec/replicas': got string, want [a-z ]*integer"

# Credentials: each role's pods mount their own file and nothing of the
# other role's or NATS's.
"$helm" template "$RELEASE" "$CHART" -f "$CHART/ci-values.yaml" --show-only templates/api.yaml >"$tmp/api-only.yaml"
"$helm" template "$RELEASE" "$CHART" -f "$CHART/ci-values.yaml" --show-only templates/worker.yaml >"$tmp/worker-only.yaml"
grep -q "secretName: $RELEASE-api-creds" "$tmp/api-only.yaml" || fail "the API pods do not mount $RELEASE-api-creds"
grep -q "secretName: $RELEASE-worker-creds" "$tmp/worker-only.yaml" || fail "the workers do not mount $RELEASE-worker-creds"
if grep -E -q 'worker-creds|worker\.creds|nats-auth' "$tmp/api-only.yaml"; then
	fail "the API pods name the workers' or NATS's secrets"
fi
if grep -E -q 'api-creds|api\.creds|nats-auth' "$tmp/worker-only.yaml"; then
	fail "the workers name the API's or NATS's secrets"
fi
ok "api.creds only in API pods, worker.creds only in workers, the NATS secret in neither"

step "5. the NATS configuration the chart renders ($nats_render)"
sts=$RELEASE-nats
"$check" -extract "ConfigMap/$sts-config/nats.conf" "$tmp/$nats_render.yaml" >"$tmp/nats.conf" 2>/dev/null ||
	fail "no nats.conf in the render"
"$check" -extract "Secret/$RELEASE-nats-auth/auth.conf" "$tmp/$nats_render.yaml" >"$tmp/auth.conf" 2>/dev/null ||
	fail "no auth.conf in the render's $RELEASE-nats-auth"
mapfile -t podenv < <("$check" -env "StatefulSet/$sts/nats" "$tmp/$nats_render.yaml" 2>/dev/null)
[ "${#podenv[@]}" -gt 0 ] || fail "no environment for the NATS container"
# The pod's layout: /etc/nats-config/nats.conf includes ../nats-auth/auth.conf.
mkdir -p "$tmp/t/etc/nats-config" "$tmp/t/etc/nats-auth"
cp "$tmp/nats.conf" "$tmp/t/etc/nats-config/"
cp "$tmp/auth.conf" "$tmp/t/etc/nats-auth/"
env -i PATH="$PATH" "${podenv[@]}" "$nats_server" -t -c "$tmp/t/etc/nats-config/nats.conf" >"$tmp/t.out" 2>&1 || {
	cat "$tmp/t.out" >&2
	fail "nats-server -t on the rendered configuration"
}
ok "nats-server -t: the rendered nats.conf with the pod's environment and the Secret's auth.conf"

# free_ports N: N free TCP ports on 127.0.0.1.
free_ports() {
	python3 -c '
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}
read -r -a ports <<<"$(free_ports 11)"
cport=("${ports[@]:0:3}") rport=("${ports[@]:3:3}") mport=("${ports[@]:6:3}")
api_port=${ports[9]} worker_port=${ports[10]}

# Three servers from the rendered file: only the listen addresses (loopback),
# the store and pid paths, and the routes' hosts (in the environment) differ
# from what the pods run.
for i in 0 1 2; do
	d=$tmp/n$i
	mkdir -p "$d/etc/nats-config" "$d/etc/nats-auth" "$d/data"
	cp "$tmp/auth.conf" "$d/etc/nats-auth/"
	sed -e "s|\"port\": 4222,|\"host\": \"127.0.0.1\", \"port\": ${cport[$i]},|" \
		-e "s|\"port\": 6222,|\"host\": \"127.0.0.1\", \"port\": ${rport[$i]},|" \
		-e "s|\"http_port\": 8222,|\"http\": \"127.0.0.1:${mport[$i]}\",|" \
		-e "s|\"store_dir\": \"/data\"|\"store_dir\": \"$d/data\"|" \
		-e "s|\"pid_file\": \"/var/run/nats/nats.pid\"|\"pid_file\": \"$d/nats.pid\"|" \
		"$tmp/nats.conf" >"$d/etc/nats-config/nats.conf"
	for want in "\"port\": ${cport[$i]}" "\"port\": ${rport[$i]}" "127.0.0.1:${mport[$i]}" "$d/data" "$d/nats.pid"; do
		grep -q -F "$want" "$d/etc/nats-config/nats.conf" ||
			fail "the rendered nats.conf changed shape: this script's edits for loopback no longer apply ($want)"
	done
	env=()
	for e in "${podenv[@]}"; do
		case $e in
		POD_NAME=* | SERVER_NAME=*) e="${e%%=*}=$sts-$i" ;;
		ROUTE_URL_*)
			j=${e%%=*}
			j=${j#ROUTE_URL_}
			e="${e%@*}@127.0.0.1:${rport[$j]}"
			;;
		esac
		env+=("$e")
	done
	env -i PATH="$PATH" "${env[@]}" "$nats_server" -c "$d/etc/nats-config/nats.conf" >"$d/log" 2>&1 &
	pids+=($!)
done
# Up when each answers /healthz (JetStream current) and has its 2 peers.
up=
for _ in $(seq 120); do
	up=1
	for i in 0 1 2; do
		curl -sf "http://127.0.0.1:${mport[$i]}/healthz" >/dev/null 2>&1 || up=
		routes=$(curl -sf "http://127.0.0.1:${mport[$i]}/routez" 2>/dev/null | python3 -c 'import json,sys; print(len({r["remote_name"] for r in json.load(sys.stdin).get("routes") or []}))' 2>/dev/null || echo 0)
		[ "$routes" -ge 2 ] || up=
	done
	[ -n "$up" ] && break
	sleep 0.5
done
if [ -z "$up" ]; then
	tail -n 20 "$tmp"/n*/log >&2
	fail "the three NATS servers did not form a cluster with JetStream in 60 s"
fi
ok "three nats-servers from the rendered configuration: routes with the Secret's credentials, JetStream up"
grep -q 'ChaCha20-Poly1305' "$tmp/n0/log" || {
	tail -n 30 "$tmp/n0/log" >&2
	fail "JetStream does not say it encrypts (ChaCha20-Poly1305)"
}
ok "JetStream encrypted at rest (ChaCha20-Poly1305, the Secret's key)"

# nats_hello PORT CONNECT-JSON: the server's first answer after CONNECT and
# PING (-ERR ... or PONG).
nats_hello() {
	local reply
	exec 3<>"/dev/tcp/127.0.0.1/$1"
	read -r -t 5 _ <&3 # INFO
	printf 'CONNECT %s\r\nPING\r\n' "$2" >&3
	read -r -t 5 reply <&3 || reply=
	exec 3<&- 3>&-
	printf '%s' "${reply%$'\r'}"
}
r=$(nats_hello "${cport[0]}" '{"verbose":false,"pedantic":false,"protocol":1}')
case $r in *"Authorization Violation"*) ;; *) fail "a client without credentials got '$r', not an authorization violation" ;; esac
ok "a client without credentials is refused"
r=$(nats_hello "${rport[0]}" '{"verbose":false,"pedantic":false,"user":"route","pass":"wrong","tls_required":false,"name":"deploy-check"}')
case $r in *"Authorization Violation"*) ;; *) fail "a route with a wrong password got '$r', not an authorization violation" ;; esac
ok "a route with a wrong password is refused"

if [ -n "$init" ]; then
	# The nodes, each with its own role's file, through the chart's NATS.
	urls=nats://127.0.0.1:${cport[0]},nats://127.0.0.1:${cport[1]},nats://127.0.0.1:${cport[2]}
	mkdir -p "$tmp/api" "$tmp/worker"
	# Without this environment's SANDBOX_RUN_* settings: only the flags.
	unset_sr=()
	for v in $(compgen -e | grep '^SANDBOX_RUN_' || true); do unset_sr+=(-u "$v"); done
	env "${unset_sr[@]}" "$sr" worker --nats "$urls" --nats-creds "$init/worker.creds" \
		--addr "127.0.0.1:$worker_port" --data-dir "$tmp/worker" --workers 1 >"$tmp/worker.log" 2>&1 &
	pids+=($!)
	env "${unset_sr[@]}" "$sr" serve --role api --nats "$urls" --nats-creds "$init/api.creds" \
		--addr "127.0.0.1:$api_port" --data-dir "$tmp/api" >"$tmp/api.log" 2>&1 &
	pids+=($!)
	ready=
	for _ in $(seq 120); do
		if curl -sf "http://127.0.0.1:$worker_port/readyz" >/dev/null 2>&1 &&
			curl -sf "http://127.0.0.1:$api_port/readyz" >/dev/null 2>&1; then
			ready=1
			break
		fi
		sleep 0.5
	done
	if [ -z "$ready" ]; then
		echo "worker /readyz: $(curl -s "http://127.0.0.1:$worker_port/readyz")" >&2
		echo "api /readyz: $(curl -s "http://127.0.0.1:$api_port/readyz")" >&2
		tail -n 20 "$tmp/worker.log" "$tmp/api.log" >&2
		fail "the API node and the worker (cluster init's creds) were not ready in 60 s"
	fi
	ok "an API node (api.creds) and a worker (worker.creds) ready (/readyz 200) through the rendered NATS"
	# shellcheck disable=SC2016 # $((6*7)) is the program's
	out=$(curl -s -m 60 "http://127.0.0.1:$api_port/api/sandbox/execute" -H 'Content-Type: application/json' \
		-d '{"language":"bash","code":"echo $((6*7))"}')
	case $out in *'"stdout":"42\n"'*) ;; *)
		tail -n 20 "$tmp/worker.log" "$tmp/api.log" >&2
		fail "a run through the API node: $out"
		;;
	esac
	ok "a run through them: bash printed 42"
else
	skip "sandbox-run nodes on the rendered NATS (no cluster init credentials)"
fi

step "summary"
for r in "${ran[@]}"; do echo "  ran:     $r"; done
for r in "${notrun[@]+"${notrun[@]}"}"; do echo "  not run: $r"; done
echo "  not run: an install into a Kubernetes cluster (none here), building or pulling images, starting the units under systemd, kubeconform with the upstream kubernetes-json-schema files (downloaded from the internet; it ran against schemas generated from k8s.io/api $k8s_api's types instead)"
echo "deploy-check: ${#ran[@]} passed, 0 failed"
