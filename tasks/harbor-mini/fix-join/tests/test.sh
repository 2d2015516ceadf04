#!/bin/sh
ok=0
[ "$(sh /app/join.sh a b c 2>/dev/null)" = "a,b,c" ] && \
  [ "$(sh /app/join.sh solo 2>/dev/null)" = "solo" ] && \
  [ "$(sh /app/join.sh 'x y' z 2>/dev/null)" = "x y,z" ] && ok=1
if [ "$ok" = 1 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
