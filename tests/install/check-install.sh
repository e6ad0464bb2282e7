#!/bin/bash
# Installs the build into a temporary DESTDIR and checks what arrived there:
# every file, the units with systemd-analyze verify, the man pages with
# man --warnings, the QEMU descriptors against --print-capabilities, the
# bash completion and the man pages against each command's --help, the
# example files, and socket activation of vmio net through its wrapper.
# A tool it needs that is missing fails the test: nothing is skipped.
#
# meson.build passes the build's directories: MESON, BUILD_ROOT, and the
# absolute BINDIR, LIBEXECDIR, MANDIR, DATADIR, DOCDIR, UNITDIR,
# SYSUSERSDIR, CONFDIR.
set -euo pipefail
export LC_ALL=C.UTF-8

fail() {
	echo "check-install: $*" >&2
	exit 1
}

for tool in systemd-analyze systemd-socket-activate man python3 sh; do
	command -v "$tool" >/dev/null ||
		fail "'$tool' is missing: run scripts/deps.sh (packages systemd, man-db, python3)"
done
[[ -x $MESON ]] || fail "meson not found at '$MESON'"

dest=$(mktemp -d)
activator=
cleanup() {
	if [[ -n $activator ]]; then
		kill "$activator" 2>/dev/null || true
		wait "$activator" 2>/dev/null || true
	fi
	rm -rf "$dest"
}
trap cleanup EXIT

"$MESON" install -C "$BUILD_ROOT" --no-rebuild --quiet --destdir "$dest" >/dev/null ||
	fail "meson install --destdir failed"
root() { echo "$dest$1"; } # an installed path, as it lies in DESTDIR
vmio=$(root "$BINDIR/vmio")
commands=(vsock net redirect loopback)

# ---- Every file ---------------------------------------------------------

executables=("$BINDIR/vmio" "$LIBEXECDIR/vmio-vsock" "$LIBEXECDIR/vmio-net"
	"$LIBEXECDIR/vmio-net-accept")
units=(vmio-vsock@.service vmio-net@.service vmio-net-accept@.socket
	vmio-net-accept@.service vmio-redirect@.service)
descriptors=(vsock net)
files=("${executables[@]}")
for u in "${units[@]}"; do files+=("$UNITDIR/$u"); done
for p in vmio "${commands[@]/#/vmio-}"; do files+=("$MANDIR/man1/$p.1"); done
for d in "${descriptors[@]}"; do files+=("$DATADIR/qemu/vhost-user/50-vmio-$d.json"); done
files+=("$SYSUSERSDIR/vmio.conf")
files+=("$DATADIR/bash-completion/completions/vmio" "$DOCDIR/LICENSE"
	"$DOCDIR/examples/vsock/vm1.yaml" "$DOCDIR/examples/net/vm1.conf"
	"$DOCDIR/examples/redirect/syslog.conf")
for f in "${files[@]}"; do
	[[ -f $(root "$f") ]] || fail "not installed: $f"
done
for f in "${executables[@]}"; do
	[[ -x $(root "$f") ]] || fail "not executable: $f"
done
echo "installed: ${#files[@]} files"

# ---- Units ----------------------------------------------------------------

# verify insists that each command exists: the copies it reads run the
# installed programs where they lie in DESTDIR. It also opens every
# Documentation= page, so MANPATH is the installed one. It reports
# unknown keys and bad values on stderr with status 0: any output fails.
units_dir=$dest/.verify
mkdir "$units_dir"
for u in "${units[@]}"; do
	while read -r key cmd _; do
		[[ -x $(root "$cmd") ]] || fail "$u: $key names $cmd, which is not installed"
	done < <(sed -n 's/^\(ExecStart\|ExecReload\)=\([^ ]*\).*/\1 \2/p' "$(root "$UNITDIR/$u")")
	sed -e "s|$BINDIR/|$(root "$BINDIR")/|g" \
		-e "s|$LIBEXECDIR/|$(root "$LIBEXECDIR")/|g" \
		"$(root "$UNITDIR/$u")" >"$units_dir/$u"
done
out=$(MANPATH=$(root "$MANDIR") systemd-analyze verify "$units_dir"/* 2>&1) ||
	fail "systemd-analyze verify failed: $out"
[[ -z $out ]] || fail "systemd-analyze verify: $out"
echo "units: ${#units[@]} verified"

# What systemd is to see of each unit (the boot test checks it happens):
# readiness, retries that outlast a peer restarting, the control socket,
# who may connect, and the socket unit's order against its service.
unit_has() { # unit, Key=value lines it must hold as they are
	local u=$1 line
	shift
	for line; do
		grep -qxF -e "$line" "$(root "$UNITDIR/$u")" || fail "$u lacks '$line'"
	done
}
access=("Group=vmio" "UMask=0007")
retry=("Restart=on-failure" "RestartSec=5s" "RestartPreventExitStatus=2"
	"StartLimitIntervalSec=10min" "StartLimitBurst=60")
# vsock comes back at once, with its sessions from the fd store.
unit_has vmio-vsock@.service Type=notify "${access[@]}" "Restart=on-failure" \
	"RestartSec=500ms" "RestartPreventExitStatus=2" "StartLimitIntervalSec=10min" \
	"StartLimitBurst=60" "FileDescriptorStoreMax=8192" \
	"ExecStart=$BINDIR/vmio vsock --fd-store --config $CONFDIR/vsock/%i.yaml --control /run/vmio/vsock/%i/control.sock" \
	"ExecReload=$BINDIR/vmio reload /run/vmio/vsock/%i/control.sock" "NotifyAccess=all"
# net too, with its session, TAP queues and control state from the store.
unit_has vmio-net@.service Type=notify "${access[@]}" "Restart=on-failure" \
	"RestartSec=500ms" "RestartPreventExitStatus=2" "StartLimitIntervalSec=10min" \
	"StartLimitBurst=60" "FileDescriptorStoreMax=2048" \
	"ExecStart=$BINDIR/vmio net --fd-store --socket /run/vmio/net/%i/vhost.sock --control /run/vmio/net/%i/control.sock \$OPTIONS" \
	"ExecReload=$BINDIR/vmio reload /run/vmio/net/%i/control.sock" "NotifyAccess=all"
unit_has vmio-redirect@.service Type=notify "${access[@]}" "${retry[@]}" \
	"ExecStart=$BINDIR/vmio redirect --control /run/vmio/redirect/%i/control.sock \$OPTIONS \${ADDRESS1} \${ADDRESS2}" \
	"ExecReload=$BINDIR/vmio reload /run/vmio/redirect/%i/control.sock" "NotifyAccess=all"
# A stop keeps the store where systemd can (254 and later: the package is
# built for the release it runs on, and so is this install).
sdv=$(systemctl --version 2>/dev/null | sed -n '1s/^systemd \([0-9]*\).*/\1/p')
for u in vmio-vsock@ vmio-net@; do
	if ((${sdv:-0} >= 254)); then
		unit_has "$u.service" "FileDescriptorStorePreserve=yes"
	else
		unit_has "$u.service" "# No FileDescriptorStorePreserve=: built for systemd ${sdv:-0}, which has none (254 and later do)"
	fi
done
# Each stops its main process itself (the successor of a hand-over is not
# systemd's child, which systemd 252 cannot wait for).
for u in vmio-vsock@ vmio-net@ vmio-redirect@; do
	# shellcheck disable=SC2016 # the unit's text, $$MAINPID as written
	unit_has "$u.service" 'ExecStop=/bin/sh -c '"'"'kill -TERM "$$MAINPID" 2>/dev/null; while kill -0 "$$MAINPID" 2>/dev/null; do sleep 0.05; done'"'"
done
unit_has vmio-net-accept@.service Type=notify "${access[@]}" \
	"ReadWritePaths=/run/vmio/net"
# shellcheck disable=SC2016 # the wrapper's text, $name as it is written
grep -qF -- '--control "/run/vmio/net/$name/control.sock"' "$(root "$LIBEXECDIR/vmio-net-accept")" ||
	fail "vmio-net-accept gives no --control /run/vmio/net/NAME/control.sock"
unit_has vmio-net-accept@.socket "Conflicts=vmio-net@%i.service" \
	"After=vmio-net@%i.service" "RemoveOnStop=yes" "SocketGroup=vmio" \
	"SocketMode=0660" "ListenStream=/run/vmio/net/%i/vhost.sock"
grep -qx 'g vmio - -' "$(root "$SYSUSERSDIR/vmio.conf")" ||
	fail "sysusers.d/vmio.conf does not make the group vmio"
echo "units: notify, retries, control sockets, group vmio, socket order"

# ---- Man pages --------------------------------------------------------

# The words of a command's --help that are options: every one must be in
# its man page and in the completion.
help_options() { # command
	local help
	help=$("$vmio" "$1" --help)
	{
		grep -oE -- '--[a-z][a-z-]+' <<<"$help"
		# Short options stand at the start of a line, before a comma.
		grep -oE -- '^ +-[a-z](, -[a-z])*,' <<<"$help" | grep -oE -- '-[a-z]'
	} | sort -u
}
for p in vmio "${commands[@]/#/vmio-}"; do
	page=$(root "$MANDIR/man1/$p.1")
	out=$(man --warnings -l "$page" 2>&1 >/dev/null) || fail "man -l $p.1 failed: $out"
	[[ -z $out ]] || fail "man --warnings -l $p.1: $out"
	[[ $p == vmio ]] && continue
	text=$(MANWIDTH=200 man -l "$page" 2>/dev/null)
	for o in $(help_options "${p#vmio-}"); do
		grep -qE -e "(^|[^a-z-])$o([^a-z-]|\$)" <<<"$text" ||
			fail "$p.1 does not describe $o"
	done
done
# `vmio stats` has no page of its own: vmio(1) describes it.
text=$(MANWIDTH=200 man -l "$(root "$MANDIR/man1/vmio.1")" 2>/dev/null)
for o in $(help_options stats); do
	grep -qE -e "(^|[^a-z-])$o([^a-z-]|\$)" <<<"$text" ||
		fail "vmio.1 does not describe vmio stats $o"
done
echo "man pages: $((${#commands[@]} + 1)) render without warnings, every option described"

# ---- QEMU descriptors -------------------------------------------------

# VhostUserBackendType of QEMU's docs/interop/vhost-user.json.
qemu_types='9p balloon block caif console crypto gpu input net rng rpmsg rproc-serial scsi vsock fs'
for d in "${descriptors[@]}"; do
	json=$(root "$DATADIR/qemu/vhost-user/50-vmio-$d.json")
	python3 -m json.tool "$json" >/dev/null || fail "50-vmio-$d.json is not JSON"
	fields=$(python3 - "$json" "$qemu_types" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
allowed = {"description", "type", "binary", "tags"}
if set(doc) - allowed or not {"description", "type", "binary"} <= set(doc):
    sys.exit(f"{sys.argv[1]}: keys {sorted(doc)}, the schema has {sorted(allowed)}")
if doc["type"] not in sys.argv[2].split():
    sys.exit(f"{sys.argv[1]}: type {doc['type']!r} is not one of QEMU's")
print(doc["type"], doc["binary"])
PY
	) || fail "50-vmio-$d.json does not follow QEMU's schema"
	read -r type binary <<<"$fields"
	[[ $type == "$d" ]] || fail "50-vmio-$d.json: type $type"
	[[ $binary == "$LIBEXECDIR/vmio-$d" ]] || fail "50-vmio-$d.json: binary $binary"
	# The entry point as installed, with the vmio it runs redirected to
	# DESTDIR.
	caps=$(sed "s|$BINDIR/vmio|$vmio|" "$(root "$binary")" | sh -s -- --print-capabilities) ||
		fail "$binary --print-capabilities failed"
	python3 - "$type" "$caps" "$("$vmio" "$d" --print-capabilities)" <<'PY' ||
import json, sys
want, got, direct = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
if got != direct or got.get("type") != want or not isinstance(got.get("features"), list):
    sys.exit(f"capabilities {got}, vmio prints {direct}, descriptor type {want!r}")
PY
		fail "$binary --print-capabilities does not match 50-vmio-$d.json"
done
echo "descriptors: ${#descriptors[@]} parse, types and capabilities match"

# ---- Bash completion ------------------------------------------------------

completion=$(root "$DATADIR/bash-completion/completions/vmio")
bash -n "$completion" || fail "the completion is not valid bash"
complete_words() { # words of the line; prints what completing its last gives
	bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		_vmio; printf "%s\n" "${COMPREPLY[@]}"' complete "$completion" "$@" 2>/dev/null
}
got=$(complete_words vmio "")
for c in "${commands[@]}"; do
	grep -qx "$c" <<<"$got" || fail "completion of 'vmio ' lacks $c"
done
for c in "${commands[@]}"; do
	got=$(complete_words vmio "$c" -)
	for o in $(help_options "$c"); do
		grep -qx -e "$o" <<<"$got" || fail "completion of 'vmio $c -' lacks $o"
	done
done
got=$(complete_words vmio stats -)
for o in $(help_options stats); do
	grep -qx -e "$o" <<<"$got" || fail "completion of 'vmio stats -' lacks $o"
done
echo "completion: every command and option"

# ---- Examples ---------------------------------------------------------------

# A vsock configuration as the service would run it, its paths moved to
# a folder of ours: it must parse and listen.
run=$dest/.run
mkdir -p "$run/vsock/vm1"
vsock_listens() { # YAML file, a socket it makes, what it is for messages
	local pid
	sed "s|/run/vmio/|$run/|g" "$1" >"$run/vsock.yaml"
	"$vmio" vsock --config "$run/vsock.yaml" -q &
	pid=$!
	for _ in $(seq 100); do
		[[ -S $2 ]] && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	[[ -S $2 ]] || fail "vmio vsock does not listen with $3"
	kill -TERM "$pid"
	wait "$pid" || fail "vmio vsock with $3 exited $?"
}
vsock_listens "$(root "$DOCDIR/examples/vsock/vm1.yaml")" "$run/vsock/vm1/vhost.sock" \
	examples/vsock/vm1.yaml
# So must vmio-vsock(1)'s file, as copied from the page: the roff block
# that starts with its options, unescaped.
sed -n '/^max_connections:/,/^\.fi/p' "$(root "$MANDIR/man1/vmio-vsock.1")" |
	sed -e '/^\.fi/d' -e 's/\\-/-/g' >"$run/man.yaml"
grep -q '^vms:' "$run/man.yaml" || fail "vmio-vsock(1) has no YAML example to copy"
vsock_listens "$run/man.yaml" "$run/vsock/vm1/vm4.sock" "vmio-vsock(1)'s YAML example"
# The other two are EnvironmentFile= lines, which sh reads the same way.
sets() { # example file, the variables it must set
	local file=$1
	shift
	# shellcheck disable=SC2016 # for the inner shell
	sh -c '. "$1"; shift; for v; do eval "test -n \"\${$v:-}\"" || exit 1; done' \
		sh "$(root "$DOCDIR/examples/$file")" "$@" ||
		fail "examples/$file does not set $*"
}
sets net/vm1.conf OPTIONS
sets redirect/syslog.conf OPTIONS ADDRESS1 ADDRESS2
echo "examples: vsock's and vmio-vsock(1)'s listen, net and redirect set what their units read"

# ---- Socket activation ------------------------------------------------------

# What systemd does for vmio-net-accept@t1.socket: listen on
# /run/vmio/net/t1/vhost.sock, accept, start the wrapper with the
# connection on fd 3 and LISTEN_FDNAMES=connection (systemd before 257
# ignores FileDescriptorName= with Accept=yes), so the wrapper must find
# t1 in the socket's address. Its /etc/vmio and /run/vmio are moved to
# folders of ours. A vhost-user GET_FEATURES must be answered on the
# connection, the unit's control socket must answer `vmio stats`, and
# vmio must end when the connection closes.
mkdir -p "$run/conf/net" "$run/net/t1"
echo 'OPTIONS="--null -q"' >"$run/conf/net/t1.conf"
sed -e "s|$BINDIR/vmio|$vmio|" -e "s|$CONFDIR/|$run/conf/|" -e "s|/run/vmio/|$run/|g" \
	"$(root "$LIBEXECDIR/vmio-net-accept")" >"$run/accept"
systemd-socket-activate -l "$run/net/t1/vhost.sock" --accept --fdname=connection \
	sh "$run/accept" 2>"$run/activate.log" &
activator=$!
python3 - "$run/net/t1/vhost.sock" "$vmio" "$run/net/t1/control.sock" <<'PY' ||
import json, os, socket, struct, subprocess, sys, time
for _ in range(100):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(sys.argv[1])
        break
    except OSError:
        time.sleep(0.05)
s.settimeout(5)
s.sendall(struct.pack("<III", 1, 1, 0))  # GET_FEATURES, version 1
reply = b""
while len(reply) < 20:
    chunk = s.recv(20 - len(reply))
    if not chunk:
        sys.exit("connection closed before the reply")
    reply += chunk
req, flags, size, features = struct.unpack("<IIIQ", reply)
if req != 1 or flags != 5 or size != 8:
    sys.exit(f"reply {req} {flags:#x} {size}")
# The reply came after the control socket was bound.
out = subprocess.run([sys.argv[2], "stats", "--json", sys.argv[3]],
                     capture_output=True, text=True, timeout=10)
if out.returncode != 0 or json.loads(out.stdout).get("device") != "net":
    sys.exit(f"vmio stats {sys.argv[3]}: {out.returncode} {out.stdout} {out.stderr}")
s.close()
PY
	fail "no vhost-user answer or stats through vmio-net-accept: $(cat "$run/activate.log")"
for _ in $(seq 100); do
	grep -q "died with code" "$run/activate.log" && break
	sleep 0.05
done
grep -q "died with code 0" "$run/activate.log" ||
	fail "vmio net --fd 3 did not end cleanly with its VMM: $(cat "$run/activate.log")"
[[ ! -e $run/net/t1/control.sock ]] || fail "vmio net left its control socket behind"
echo "socket activation: vmio-net-accept serves the accepted connection"

echo "ok"
