#!/usr/bin/env bash
# Build kube-apiserver and kube-controller-manager from Debian's `kubernetes`
# source package and cache the two binaries outside the repository.
# Usage: build_k8s.sh [CACHE_ROOT] [RECIPE]   (default ~/.cache/kinitiras-py, r2)
# Prints the directory holding the binaries on its last line: CACHE_ROOT/k8s-<version>-<RECIPE>.
# RECIPE names this script's build steps; change it when they change so old builds are not reused.
set -euo pipefail

CACHE_ROOT="${1:-${KINITIRAS_CACHE:-$HOME/.cache/kinitiras-py}}"
RECIPE="${2:-r2}"
mkdir -p "$CACHE_ROOT"
LOG="$CACHE_ROOT/build.log"

SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi

need_pkgs=()
command -v etcd >/dev/null 2>&1 || need_pkgs+=(etcd-server)
command -v go >/dev/null 2>&1 || need_pkgs+=(golang-go)
command -v rsync >/dev/null 2>&1 || need_pkgs+=(rsync)
command -v jq >/dev/null 2>&1 || need_pkgs+=(jq)
command -v dpkg-source >/dev/null 2>&1 || need_pkgs+=(dpkg-dev)
# The vendored reflect2 v1.0.1 crashes kube-apiserver (SIGSEGV in map iteration) when built
# with Go >= 1.18, on the first custom resource write; Debian's 1.0.2 source fixes it.
REFLECT2=/usr/share/gocode/src/github.com/modern-go/reflect2
[ -f "$REFLECT2/go_above_118.go" ] || need_pkgs+=(golang-github-modern-go-reflect2-dev)

# Reuse a finished build when one exists (any cached version).
for d in "$CACHE_ROOT"/k8s-*-"$RECIPE"/; do
  if [ -x "$d/kube-apiserver" ] && [ -x "$d/kube-controller-manager" ] && [ ${#need_pkgs[@]} -eq 0 ]; then
    echo "${d%/}"
    exit 0
  fi
done

avail_kb=$(df -Pk "$CACHE_ROOT" | awk 'NR==2 {print $4}')
if [ "$avail_kb" -lt $((4 * 1024 * 1024)) ]; then
  echo "error: building Kubernetes needs about 4 GiB free under $CACHE_ROOT; only $((avail_kb / 1024)) MiB free" >&2
  exit 3
fi

src_list=/etc/apt/sources.list.d/kinitiras-deb-src.sources
if ! grep -rqs "deb-src" /etc/apt/sources.list /etc/apt/sources.list.d/; then
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources | $SUDO tee "$src_list" >/dev/null
  else
    echo "deb-src http://deb.debian.org/debian bookworm main" | $SUDO tee /etc/apt/sources.list.d/kinitiras-deb-src.list >/dev/null
  fi
  need_update=1
fi

if [ ${#need_pkgs[@]} -gt 0 ] || [ "${need_update:-0}" = 1 ]; then
  echo "installing Debian packages: ${need_pkgs[*]:-(none)}" >&2
  $SUDO apt-get update -qq >>"$LOG" 2>&1
  if [ ${#need_pkgs[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_pkgs[@]}" >>"$LOG" 2>&1 \
      || { echo "error: apt-get install ${need_pkgs[*]} failed; see $LOG" >&2; exit 4; }
  fi
fi

for d in "$CACHE_ROOT"/k8s-*-"$RECIPE"/; do
  if [ -x "$d/kube-apiserver" ] && [ -x "$d/kube-controller-manager" ]; then echo "${d%/}"; exit 0; fi
done

work="$CACHE_ROOT/src"
rm -rf "$work"; mkdir -p "$work"
echo "fetching the kubernetes source package (log: $LOG)" >&2
( cd "$work" && apt-get source --download-only kubernetes >>"$LOG" 2>&1 && dpkg-source -x --skip-patches kubernetes_*.dsc kubernetes-src >>"$LOG" 2>&1 ) \
  || { echo "error: fetching the kubernetes source package failed; see $LOG" >&2; exit 5; }
# Debian's "1.20.5+really1.20.2-1.1+deb12u1" is upstream 1.20.2.
version=$(cd "$work" && ls kubernetes_*.dsc | sed -E 's/kubernetes_(.*)\.dsc/\1/; s/.*\+really//; s/-.*$//')
src="$work/kubernetes-src"
rsync -a --delete --exclude go.mod "$REFLECT2/" "$src/vendor/github.com/modern-go/reflect2/"
mkdir -p "$src/.go/src/k8s.io"
ln -sfn ../../.. "$src/.go/src/k8s.io/kubernetes"
echo "building kube-apiserver and kube-controller-manager $version (several minutes; log: $LOG)" >&2
(
  cd "$src/.go/src/k8s.io/kubernetes"
  export GOPATH="$src/.go" GOCACHE="$CACHE_ROOT/gocache" CGO_ENABLED=0 GO111MODULE=on GOFLAGS=-mod=vendor GOPROXY=off
  make WHAT=cmd/kube-apiserver && make WHAT=cmd/kube-controller-manager
) >>"$LOG" 2>&1 || { echo "error: Kubernetes build failed; see $LOG" >&2; exit 6; }
out="$CACHE_ROOT/k8s-$version-$RECIPE"
mkdir -p "$out.tmp"
cp "$src/_output/bin/kube-apiserver" "$src/_output/bin/kube-controller-manager" "$out.tmp/"
rm -rf "$out"; mv "$out.tmp" "$out"
rm -rf "$work" "$CACHE_ROOT/gocache"
echo "$out"
