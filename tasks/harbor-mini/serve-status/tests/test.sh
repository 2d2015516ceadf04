#!/bin/sh
ok=0
sh /app/start.sh
i=0
while [ $i -lt 20 ]; do
  body=$(printf 'GET /status.txt HTTP/1.0\r\n\r\n' | nc 127.0.0.1 8085 2>/dev/null | sed '1,/^\r*$/d')
  [ -n "$body" ] && break
  i=$((i+1)); sleep 0.2
done
[ "$body" = ready ] && ok=1
if [ "$ok" = 1 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
