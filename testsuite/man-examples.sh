#!/bin/sh
# man-examples.sh -- run the EXAMPLES section of man pages and compare
# what it prints with what the page shows.
# Copyright (C) 2026 The kamepool authors.
# This file is part of kamepool, free software under the GNU LGPL
# version 2.1 or later; see COPYING.
#
# usage: man-examples.sh --srcdir TOP_SRCDIR --builddir TOP_BUILDDIR
#          [--cc CC] [--cflags FLAGS] [--have FEATURE]... [--keep] PAGE...
#
# For each PAGE it prints one line, and exits 1 if any page failed:
#   PASS: PAGE
#   FAIL: PAGE: WHY                (the first differing line, or the
#                                  block or command that went wrong)
#   UNSUPPORTED: PAGE: needs FEATURE
#
# The convention of an EXAMPLES section (testsuite/README says the same
# for the writers of pages):
#
# - Every ".Bd -literal" block of the section is either a program or a
#   shell session; a block that is neither, or a section with no session,
#   fails.
# - A session block's first line starts with "$ ".  Each line that
#   starts with "$ " is a command (a line ending in a backslash goes on
#   on the next line); the lines after it, up to the next command, are
#   what the command prints, its standard output and standard error
#   together.  A command that exits with a status other than 0 fails,
#   unless the page shows the status itself (";  echo $?").
# - Any other block is a file, example.c unless the comment line
#   ".\" example-file: NAME" comes just before its ".Bd".  The sessions
#   of the page run in one temporary directory that holds its files.
# - In a shown line, "..." stands for any text (an address, a pid, a
#   time); a shown line that is only "..." stands for any number of
#   lines.  The page says so next to such output.
# - ".\" example-requires: FEATURE..." anywhere in the section makes the
#   page UNSUPPORTED (reported, not skipped silently) unless the caller
#   passed --have FEATURE for each: interpose, no-sanitizer, numa, ...
#
# The commands run as if the package were installed in the default
# paths: "cc" is CC with the build's flags, the headers of the source
# tree and the libraries of the build tree (-L and -rpath);
# "pkg-config" answers for the build tree's .pc files; "kamepool-run"
# is the build tree's, with its library; and "/usr/local/lib/" in a
# command names the build tree's library directory.

set -u
srcdir=
builddir=
cc=${CC:-cc}
cflags=
have=" "
keep=no
while [ $# -gt 0 ]; do
  case $1 in
    --srcdir) srcdir=$2; shift 2 ;;
    --builddir) builddir=$2; shift 2 ;;
    --cc) cc=$2; shift 2 ;;
    --cflags) cflags=$2; shift 2 ;;
    --have) have="$have$2 "; shift 2 ;;
    --keep) keep=yes; shift ;;
    --) shift; break ;;
    -*) echo "man-examples.sh: unknown option '$1'" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ -z "$srcdir" ] || [ -z "$builddir" ] || [ $# -eq 0 ]; then
  echo "usage: man-examples.sh --srcdir DIR --builddir DIR [--cc CC] [--cflags FLAGS] [--have FEATURE]... PAGE..." >&2
  exit 2
fi
srcdir=$(cd "$srcdir" && pwd) || exit 2
builddir=$(cd "$builddir" && pwd) || exit 2
libdir=$builddir/.libs
# The compiler, by its path: the sessions' "cc" below runs it.
ccword=${cc%% *}
ccpath=$(command -v "$ccword") || { echo "man-examples.sh: no compiler '$ccword'" >&2; exit 2; }
cc="$ccpath${cc#"$ccword"}"

# The tools the sessions see first in PATH.
tools=$(mktemp -d "${TMPDIR:-/tmp}/man-examples.XXXXXX") || exit 2
trap 'rm -rf "$tools"' 0
mkdir "$tools/bin" "$tools/pc"
cat > "$tools/bin/cc" <<EOF
#!/bin/sh
exec $cc $cflags -I'$srcdir/include' "\$@" -L'$libdir' -Wl,-rpath,'$libdir'
EOF
for pc in "$builddir"/*.pc; do
  [ -f "$pc" ] || continue
  sed -e "s|^includedir=.*|includedir=$srcdir/include|" \
      -e "s|^libdir=.*|libdir=$libdir|" "$pc" > "$tools/pc/${pc##*/}"
done
realpc=$(command -v pkg-config 2>/dev/null)
if [ -n "$realpc" ]; then
  cat > "$tools/bin/pkg-config" <<EOF
#!/bin/sh
PKG_CONFIG_PATH='$tools/pc' PKG_CONFIG_LIBDIR='$tools/pc' exec '$realpc' "\$@"
EOF
  have="${have}pkg-config "
fi
cat > "$tools/bin/kamepool-run" <<EOF
#!/bin/sh
KAMEPOOL_LIBRARY='$libdir/libkamepool.so'
KAMEPOOL_CXX_LIBRARY='$libdir/libkamepool-cxx.so'
export KAMEPOOL_LIBRARY KAMEPOOL_CXX_LIBRARY
exec sh '$builddir/kamepool-run' "\$@"
EOF
chmod +x "$tools/bin/"*

# extract PAGE: write the page's files into the current directory and
# the session into ./session, one record a line: "C<TAB>command" and
# "O<TAB>shown line"; print "requires FEATURE" lines, or "error WHY".
extract () {
  awk '
    function unroff(s) {
      gsub(/\\&/, "", s)
      gsub(/\\-/, "-", s)
      gsub(/\\\(aq/, "\047", s)
      gsub(/\\\(dq/, "\"", s)
      gsub(/\\\(ga/, "`", s)
      gsub(/\\e/, "\\", s)
      return s
    }
    function fail(why) { print "error " why; failed = 1; exit }
    /^\.Sh EXAMPLES/ { sec = 1; found = 1; next }
    /^\.Sh / { sec = 0; next }
    !sec { next }
    inblock && /^\.Ed/ {
      inblock = 0
      if (kind == "file") close(name)
      next
    }
    inblock {
      line = unroff($0)
      if (line ~ /^\.[A-Za-z]/ || line ~ /^\\\\"/)
        fail("a request in a literal block: " $0)
      if (kind == "") {
        if (line ~ /^\$ /) kind = "session"
        else {
          kind = "file"
          name = nextname != "" ? nextname : "example.c"
          nextname = ""
          if (name in written) fail("two blocks write " name)
          written[name] = 1; nfiles++
        }
      }
      if (kind == "file") { print line > name; next }
      if (cont) { cmd = cmd "\n" line }
      else if (line ~ /^\$ /) { cmd = substr(line, 3) }
      else { print "O\t" line > "session"; next }
      cont = cmd ~ /\\$/
      if (!cont) {
        gsub(/\n/, "\\n", cmd)   # one record a line; the shell gets it back
        print "C\t" cmd > "session"; ncmd++
      }
      next
    }
    /^\.Bd -literal/ { inblock = 1; kind = ""; cont = 0; nblocks++; next }
    /^\.\\" example-file:/ { nextname = $3; next }
    /^\.\\" example-requires:/ {
      for (i = 3; i <= NF; i++) print "requires " $i
      next
    }
    END {
      if (failed) exit
      if (!found) print "error no EXAMPLES section"
      else if (!nblocks) print "error no literal block in EXAMPLES"
      else if (!ncmd) print "error no shell session (a block of \"$ \" lines) runs the example"
    }
  ' "$1"
}

# compare EXPECTED ACTUAL: the first difference, or nothing.
compare () {
  awk -v expf="$1" -v actf="$2" '
    function pat(s,   out, i, c) {
      out = ""
      n = split(s, parts, /\.\.\./)
      for (i = 1; i <= n; i++) {
        gsub(/[][\\^$.*+?(){}|\/]/, "\\\\&", parts[i])
        out = out parts[i] (i < n ? ".*" : "")
      }
      return "^" out "$"
    }
    BEGIN {
      ne = 0; while ((getline l < expf) > 0) e[++ne] = l
      na = 0; while ((getline l < actf) > 0) a[++na] = l
      i = 1; j = 1
      while (i <= ne) {
        if (e[i] == "...") {
          if (i == ne) exit
          while (j <= na && a[j] !~ pat(e[i + 1])) j++
          i++
          continue
        }
        if (j > na) { printf "shown line \"%s\", printed nothing more\n", e[i]; exit }
        if (a[j] !~ pat(e[i])) {
          printf "shown \"%s\", printed \"%s\"\n", e[i], a[j]; exit
        }
        i++; j++
      }
      if (j <= na) printf "printed \"%s\" past the shown output\n", a[j]
    }'
}

status=0
for page in "$@"; do
  d=$(cd "$(dirname "$page")" 2>/dev/null && pwd) && page=$d/${page##*/}
  name=${page#"$srcdir"/}
  name=${name#man/}
  work=$(mktemp -d "$tools/page.XXXXXX") || exit 2
  if [ ! -r "$page" ]; then
    echo "FAIL: $name: cannot read the page"; status=1; continue
  fi
  info=$(cd "$work" && extract "$page") || info="error the extraction failed"
  why=$(printf '%s\n' "$info" | sed -n 's/^error //p' | sed 1q)
  if [ -z "$why" ] && [ ! -f "$work/session" ]; then
    why="no session"
  fi
  if [ -n "$why" ]; then
    echo "FAIL: $name: $why"; status=1; continue
  fi
  missing=
  for f in $(printf '%s\n' "$info" | sed -n 's/^requires //p'); do
    case $have in *" $f "*) ;; *) missing="$missing $f" ;; esac
  done
  if [ -n "$missing" ]; then
    echo "UNSUPPORTED: $name: needs$missing"; continue
  fi
  result=PASS
  n=$(grep -c '^C' "$work/session")
  k=0
  while [ $k -lt "$n" ]; do
    k=$((k + 1))
    # The k-th command, and the lines shown after it.
    awk -F '\t' -v k=$k '/^C/ { c++ } c == k && /^O/ { sub(/^O\t/, ""); print }' \
      "$work/session" > "$work/.expected"
    cmd=$(awk -F '\t' -v k=$k '/^C/ && ++c == k { sub(/^C\t/, ""); gsub(/\\n/, "\n"); print }' \
      "$work/session")
    run=$(printf '%s\n' "$cmd" | sed "s|/usr/local/lib/|$libdir/|g")
    (cd "$work" && PATH="$tools/bin:$PATH" LC_ALL=C sh -c "$run" \
       > "$work/.actual" 2>&1 < /dev/null)
    rc=$?
    first=$(printf '%s\n' "$cmd" | sed 1q)
    diff=$(compare "$work/.expected" "$work/.actual")
    if [ -n "$diff" ]; then
      result="FAIL: $name: \$ $first: $diff"; break
    fi
    if [ $rc != 0 ]; then
      result="FAIL: $name: \$ $first: exit status $rc"; break
    fi
  done
  if [ "$result" = PASS ]; then
    echo "PASS: $name"
  else
    echo "$result"; status=1
    if [ $keep = yes ]; then
      cp -r "$work" "${TMPDIR:-/tmp}/man-example-$(basename "$page")"
      echo "  kept in ${TMPDIR:-/tmp}/man-example-$(basename "$page")"
    fi
  fi
  rm -rf "$work"
done
exit $status
