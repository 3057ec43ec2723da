#!/bin/bash
# The README's first command, as written, in a fresh Debian root (issue 25): debootstrap makes the
# root (minbase: no rsync; Debian's own python3, nothing else of Python), this checkout's files are
# copied in (tracked and new ones, as a user's clone holds them), and the first ```sh block of
# README.md runs there as root in a chroot of its own mount and PID namespaces.
# Ubuntu's archive cannot be reached from the machines this was written on; Ubuntu 24.04's python3
# carries the same PEP 668 marker and packs venv's pip apart the same way (python3-venv).
#
#   sudo bash benchmarks/fresh_debian.sh [SUITE ...]       (default: bookworm trixie)
#   FRESH_DEBIAN_DIR (default /var/tmp/fleet-fresh), DEBIAN_MIRROR (default http://deb.debian.org/debian)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
base=${FRESH_DEBIAN_DIR:-/var/tmp/fleet-fresh}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
[ "$(id -u)" = 0 ] || { echo "fresh_debian.sh: needs root (debootstrap, chroot, namespaces)" >&2; exit 2; }
mkdir -p "$base"
command -v debootstrap >/dev/null || { apt-get update -q && apt-get install -y -q debootstrap; }
command="$(awk '/^```sh$/ {inside=1; next} inside && /^```$/ {exit} inside {print}' "$repo/README.md")"
[ -n "$command" ] || { echo "fresh_debian.sh: no \`\`\`sh block in README.md" >&2; exit 2; }
status=0
for suite in "${@:-bookworm trixie}"; do
  for s in $suite; do
    root="$base/$s"
    echo "== Debian $s: debootstrap --variant=minbase --include=python3,ca-certificates into $root"
    if [ ! -x "$root.pristine/usr/bin/python3" ]; then
      rm -rf "$root.pristine"
      started=$(date +%s)
      debootstrap --variant=minbase --include=python3,ca-certificates "$s" "$root.pristine" "$mirror" >"$base/$s.debootstrap.log" 2>&1 \
        || { echo "debootstrap of $s failed: tail of $base/$s.debootstrap.log:"; tail -5 "$base/$s.debootstrap.log"; status=1; continue; }
      echo "   made in $(( $(date +%s) - started ))s"
    fi
    rm -rf "$root" && cp -a "$root.pristine" "$root"
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    # This machine's way out, not part of a fresh Debian: its CA bundle (a TLS-inspecting proxy
    # signs what pip fetches) and its pip.conf, when it has them.
    [ -f /etc/ssl/certs/ca-certificates.crt ] && cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
    [ -f /etc/pip.conf ] && cp /etc/pip.conf "$root/etc/pip.conf"
    mkdir -p "$root/root/fleet"
    (cd "$repo" && git ls-files -z -c -o --exclude-standard | xargs -0 -I{} sh -c 'test -e "{}" && printf "%s\0" "{}"' | tar --null -T - -cf -) | tar -C "$root/root/fleet" -xf -
    echo "   $(chroot "$root" sh -c '. /etc/os-release; echo "$PRETTY_NAME"'); $(chroot "$root" python3 --version);" \
         "rsync: $(chroot "$root" sh -c 'command -v rsync || echo none')," \
         "PEP 668 marker: $(chroot "$root" sh -c 'ls /usr/lib/python3*/EXTERNALLY-MANAGED 2>/dev/null || echo none')"
    echo "   \$ $command"
    started=$(date +%s)
    set +e
    unshare --mount --pid --fork sh -c "
      mount --rbind /dev '$root/dev' && mount -t proc proc '$root/proc' && mount -t tmpfs tmpfs '$root/tmp' &&
      exec chroot '$root' /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        sh -c 'cd /root/fleet && $command'" 2>&1 | sed 's/^/   | /'
    code=${PIPESTATUS[0]}
    set -e
    echo "   exit $code in $(( $(date +%s) - started ))s"
    [ "$code" = 0 ] || status=1
    summary=$(ls "$root"/root/fleet/results/*/summary.json 2>/dev/null | head -1)
    [ -n "$summary" ] && echo "   summary: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d.get("state"), d.get("by_status"))' "$summary")"
  done
done
exit $status
