#!/bin/sh
# Start the agent's service, then wait for it with a bounded retry: up to 30 s
# by the clock (not a count of tries, which a loaded machine stretches thin),
# each fetch itself bounded (nc -w 2). Only the page's body decides.
ok=0
sh /app/start.sh
end=$(( $(date +%s) + 30 ))
body=
while :; do
  body=$(printf 'GET /status.txt HTTP/1.0\r\n\r\n' | nc -w 2 127.0.0.1 8085 2>/dev/null | sed '1,/^\r*$/d')
  [ -n "$body" ] && break
  [ "$(date +%s)" -ge "$end" ] && break
  sleep 0.2
done
[ "$body" = ready ] && ok=1
if [ "$ok" = 1 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
