#!/bin/sh
ok=0
printf 'name,score\na,10\nb,20\nc,30\n' > /tmp/s.csv
printf 'name,score\nx,7\n' > /tmp/t.csv
a=$(sh /app/average.sh /tmp/s.csv 2>/dev/null)
b=$(sh /app/average.sh /tmp/t.csv 2>/dev/null)
[ "$a" = 20 ] && [ "$b" = 7 ] && ok=1
if [ "$ok" = 1 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
