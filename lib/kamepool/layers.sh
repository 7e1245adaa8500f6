#! /bin/sh
# layers.sh -- which files of libkamepool refer to a file above them.
#
# Copyright (C) 2026 The kamepool authors.
# This file is part of kamepool, free software under the GNU LGPL
# version 2.1 or later; see COPYING.
#
# Usage: layers.sh OBJDIR [NM]
#
# OBJDIR holds the objects of a build (lib/kamepool/.libs of the build
# tree, as libkamepool_la-FILE.o).  The files, lowest layer first:
# each may refer (call a function or use a variable) only to the files
# before it.  Every reference upward is printed as
#   FILE -> HIGHER: SYMBOL
# and makes the exit status 1, unless it is in the list of known ones
# below, which says why each is still there; those are printed with
# "known:" in front.  The list is the layering's debt: it may only
# shrink.
order="os options radix sizeclass misuse policy numa thread region purge chunk prof guard init
       large cache shared heap largealloc alloc trim stats mallinfo api interpose"

# None is known: every reference goes down.
known=""

objdir=${1:?usage: layers.sh OBJDIR [NM]}
nm=${2:-nm}
rank=0
for f in $order; do
  rank=`expr $rank + 1`
  eval "rank_$f=$rank"
done
tmp=${TMPDIR:-/tmp}/kp-layers.$$
trap 'rm -f "$tmp".*' 0
# FILE SYMBOL for every definition, FILE SYMBOL for every reference.
: > "$tmp.def"
: > "$tmp.use"
for f in $order; do
  o=$objdir/libkamepool_la-$f.o
  test -f "$o" || continue
  $nm "$o" | awk -v f=$f 'NF == 3 && $2 ~ /^[TDBRC]$/ { print $3, f }' \
    >> "$tmp.def"
  $nm "$o" | awk -v f=$f '$1 == "U" { print $2, f }' >> "$tmp.use"
done
test -s "$tmp.def" || { echo "layers.sh: no objects in $objdir" >&2; exit 2; }
sort -u "$tmp.def" > "$tmp.defs"
sort -u "$tmp.use" > "$tmp.uses"
status=0
# SYMBOL USER DEFINER for every reference to a symbol of another file.
join "$tmp.uses" "$tmp.defs" | while read sym user owner; do
  test "$user" = "$owner" && continue
  eval "ru=\$rank_$user; ro=\$rank_$owner"
  test "$ro" -gt "$ru" || continue
  case " `echo $known` " in
    *" $user:$owner:$sym "*) echo "known: $user -> $owner: $sym" ;;
    *) echo "$user -> $owner: $sym"; echo x >> "$tmp.bad" ;;
  esac
done
test -f "$tmp.bad" && status=1
exit $status
