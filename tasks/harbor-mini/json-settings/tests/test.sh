#!/bin/sh
f=/app/settings.json
flat=$(tr -d ' \n\t' < "$f" 2>/dev/null)
name=0; workers=0; debug=0
case "$flat" in \{*\}) ;; *) flat= ;; esac
case "$flat" in *'"name":"megaflow"'*) name=1 ;; esac
case "$flat" in *'"workers":4,'*|*'"workers":4}'*) workers=1 ;; esac
case "$flat" in *'"debug":false'*) debug=1 ;; esac
all=0
[ $name$workers$debug = 111 ] && all=1
printf '{"reward": %s, "name": %s, "workers": %s, "debug": %s}\n' \
  $all $name $workers $debug > /logs/verifier/reward.json
