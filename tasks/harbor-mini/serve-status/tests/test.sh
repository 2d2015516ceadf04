#!/bin/sh
ok=0
sh /app/start.sh
i=0
while [ $i -lt 20 ]; do
  body=$(wget -q -T 2 -O - http://127.0.0.1:8085/status.txt 2>/dev/null) && break
  i=$((i+1)); sleep 0.2
done
[ "$body" = ready ] && ok=1
if [ "$ok" = 1 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
