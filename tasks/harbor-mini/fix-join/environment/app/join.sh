#!/bin/sh
out=$1
shift
while [ $# -gt 1 ]; do
  out="$out,$1"
  shift
done
printf '%s\n' "$out"
