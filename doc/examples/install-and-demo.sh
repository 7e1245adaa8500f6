#!/bin/sh
# install-and-demo.sh -- the README's first command: install the build
# dependencies, build and install kamepool (prefix /usr/local), then
# show both libraries at work through their installed headers,
# pkg-config files, man pages and kamepool-run.
set -e
cd "$(dirname "$0")/../.."
sudo=
[ "$(id -u)" = 0 ] || sudo=sudo
$sudo apt-get update -q
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
  --no-install-recommends build-essential autoconf automake libtool \
  pkg-config dejagnu libnuma-dev libunwind-dev google-perftools \
  graphviz golang-go g++ groff mandoc man-db python3
[ -x configure ] || ./bootstrap
[ -f Makefile ] || ./configure
make -j"$(nproc)"
$sudo make install
$sudo ldconfig
export PKG_CONFIG_PATH=/usr/local/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo
echo "== libckarena: the tinyllm arena's worked example, built with"
echo "   cc hand_example.c \$(pkg-config --cflags --libs ckarena)"
cc -o "$tmp/hand_example" doc/examples/hand_example.c \
  $(pkg-config --cflags --libs ckarena)
"$tmp/hand_example"
echo
echo "== libkamepool: kamepool_demo.c, built with"
echo "   cc kamepool_demo.c \$(pkg-config --cflags --libs kamepool) -pthread"
cc -o "$tmp/kamepool_demo" doc/examples/kamepool_demo.c \
  $(pkg-config --cflags --libs kamepool) -pthread
"$tmp/kamepool_demo"
echo
echo "== an unchanged program on the pool: kamepool-run --stats python3"
py=python3; [ -x /usr/bin/python3 ] && py=/usr/bin/python3
/usr/local/bin/kamepool-run --stats "$py" -c \
  'print(sum(len(str(list(range(i)))) for i in range(3000)))'
echo
echo "== the manual: man kame_pool_malloc, man tl_arena_alloc, man ck_bump_alloc_init"
MANPATH=/usr/local/share/man man -w kame_pool_malloc tl_arena_alloc \
  ck_bump_alloc_init kamepool
