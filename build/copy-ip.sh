#!/bin/sh
# Copies iproute2's `ip` and the shared libraries it links into OUT, as a tree to lay over the
# image's root (the Dockerfile's iproute2 stage; test/bundle.test.ts runs it outside Docker):
#   OUT/usr/sbin/ip                       the binary, dereferenced
#   OUT/<real dir of each library>/<soname>  every library ldd lists except glibc's own
# The runtime image (distroless nodejs, Debian 12) has glibc and its loader but no shell or package
# manager, so the rest has to come from a Debian 12 of the same release. Libraries go to their real
# directory (/usr/lib/<triplet> on a merged-/usr Debian), a real directory in any layout, so the COPY
# never lands on a symlinked /lib; the loader searches it by default.
#   build/copy-ip.sh OUT [PATH-TO-IP]
set -eu

out=${1:?usage: copy-ip.sh OUT [PATH-TO-IP]}
ip=$(readlink -f "${2:-$(command -v ip || echo /usr/sbin/ip)}")
[ -x "$ip" ] || { echo "copy-ip.sh: no ip binary at $ip (apt-get install iproute2)" >&2; exit 1; }

if ldd "$ip" | grep -q 'not found'; then
  ldd "$ip" >&2
  echo "copy-ip.sh: $ip lacks libraries" >&2
  exit 1
fi

mkdir -p "$out/usr/sbin"
cp -L "$ip" "$out/usr/sbin/ip"
chmod 0755 "$out/usr/sbin/ip"
echo "copy-ip.sh: $ip -> /usr/sbin/ip"

# "libbpf.so.1 => /lib/x86_64-linux-gnu/libbpf.so.1 (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)"
ldd "$ip" | sed -n 's/^[[:space:]]*\(.* => \)\{0,1\}\(\/[^ ]*\) (0x[0-9a-f]*)$/\2/p' | while read -r lib; do
  name=$(basename "$lib")
  case "$name" in
    # glibc: the image has it, and a second copy of it would have to match the image's exactly
    ld-linux* | ld64.so.* | libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | libresolv.so.* | libutil.so.* | libanl.so.*) continue ;;
  esac
  dir=$(readlink -f "$(dirname "$lib")")
  mkdir -p "$out$dir"
  cp -L "$lib" "$out$dir/$name"
  echo "copy-ip.sh: $lib -> $dir/$name"
done
