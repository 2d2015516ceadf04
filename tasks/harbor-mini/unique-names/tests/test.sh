#!/bin/sh
ok=0
want=$(printf 'ada\nalan\ngrace\nlinus\n')
[ "$(cat /app/unique.txt 2>/dev/null)" = "$want" ] && ok=1
if [ "$ok" = 1 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
